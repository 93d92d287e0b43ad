/* ss_auth.h - who may talk to us: CURVE keys and the ZAP handler.
 *
 * With security.curve on, every ShadowSync socket runs ZeroMQ CURVE. One
 * key pair is the servers' (every PS and every trainer's allreduce ROUTER
 * use it: security.server_key); clients (trainers, shadow-ctl) connect with
 * their own pair (security.client_key) and the servers' public key. A server
 * accepts a client only when a ZAP handler (ZeroMQ RFC 27) answering on
 * inproc://zeromq.zap.01 in the server's context finds its public key in
 * security.authorized or security.admin_keys. The handler marks each
 * accepted connection: User-Id is the client's public key (Z85) and the
 * property X-Admin is "1" for an admin key (every key when admin_keys is
 * empty), which the server reads from any received frame.
 *
 * With security.curve off and security.token_file set (scripts/shadow-launch
 * sets it for every local job: RUN_DIR/admin.token), every socket runs
 * ZeroMQ PLAIN instead: a client shows the job's secret as the password of
 * its handshake, and the same ZAP handler refuses a peer that does not, so
 * a server takes no message frame from it (issue 22: libzmq buffers a whole
 * multi-frame message before the application can refuse it). PLAIN sends
 * the secret unencrypted: it keeps out local processes that cannot read the
 * run directory, and anyone who can sniff a network link; CURVE stays the
 * option across machines. A client without the secret (NULL mechanism) is
 * cut at the greeting; a wrong secret gets a bare "400" refusal.
 *
 * Key files (written by ss_curve_keygen, "shadow-ctl keygen NAME"): a line
 * is a 40-character Z85 key, optionally followed by whitespace and a label;
 * empty lines and lines starting with "# " are skipped. NAME.key holds the
 * secret key (mode 0600), NAME.pub the public key; a list file (authorized,
 * admin_keys) holds any number of public keys. */
#ifndef SS_AUTH_H
#define SS_AUTH_H

#include <stdint.h>
#include <zmq.h>

#include "ss_cfg.h"

#define SS_Z85_KEY_LEN 40            /* a 32-byte CURVE key in Z85 text */
#define SS_AUTH_DOMAIN "shadowsync"  /* ZAP domain of our server sockets */
#define SS_AUTH_MAX_KEYS 65536       /* most keys one list file may hold */
#define SS_ADMIN_TOKEN_MAX 129       /* longest secret of a token file, with its NUL */

/* How this process's sockets authenticate: CURVE keys (Z85 text; empty
 * strings where not loaded), or with CURVE off the job's secret for PLAIN. */
struct ss_curve {
    int on;                                  /* security.curve */
    int plain;                               /* curve off, security.token_file set */
    char token[SS_ADMIN_TOKEN_MAX];          /* plain: the secret, the PLAIN password */
    char server_public[SS_Z85_KEY_LEN + 1];  /* the servers' public key */
    char server_secret[SS_Z85_KEY_LEN + 1];  /* servers only: their secret key */
    char client_public[SS_Z85_KEY_LEN + 1];  /* clients: this process's public key */
    char client_secret[SS_Z85_KEY_LEN + 1];  /* clients: its secret key */
};

/* What a process needs from ss_curve_load(). */
enum { SS_CURVE_SERVER = 1u << 0, SS_CURVE_CLIENT = 1u << 1 };

/* Read the key files of sec that roles need into *c (caller-allocated):
 * servers need security.server_key; clients need security.client_key and
 * the servers' public key (security.server_public, or derived from
 * security.server_key when that is given). With security.curve off, *c is
 * zeroed (c->on 0) and only security.token_file is read, when set (c->plain
 * 1; every role shows or checks the same secret). Returns 0, or SS_E_CONFIG
 * with err naming the key and file (missing, unreadable, not a key, public
 * and secret that do not match, a libzmq without CURVE, a token file others
 * may read). Any thread. */
int ss_curve_load(struct ss_curve *c, const struct ss_security_cfg *sec, unsigned roles,
                  char *err, size_t err_len);

/* Overwrite the secret keys and the token in *c (before freeing it). */
void ss_curve_wipe(struct ss_curve *c);

/* 1 when c (may be NULL) authenticates its sockets: CURVE or PLAIN. A
 * process whose c is secured runs a ZAP handler (ss_auth_new) before it
 * binds any server socket. */
int ss_curve_secured(const struct ss_curve *c);

/* Make sock (not yet bound) a CURVE server with c's secret key, or with
 * c->plain a PLAIN server, in the ZAP domain SS_AUTH_DOMAIN. Does nothing
 * when c is NULL or neither. Returns 0 or SS_E_NET. Thread: sock's owner. */
int ss_curve_server(void *sock, const struct ss_curve *c);

/* Make sock (not yet connected) a CURVE client of the servers with c's
 * client keys, or with c->plain a PLAIN client showing c->token. Does
 * nothing when c is NULL or neither. Returns 0 or SS_E_NET.
 * Thread: sock's owner. */
int ss_curve_client(void *sock, const struct ss_curve *c);

/* Write a new key pair: NAME.key (secret, mode 0600) and NAME.pub (public,
 * labelled with NAME's last path part). Refuses to overwrite either file.
 * Returns 0, or SS_E_IO / SS_E_CONFIG with err. Borrows name. */
int ss_curve_keygen(const char *name, char *err, size_t err_len);

/* 1 when the list file path holds key (Z85), 0 when not, or SS_E_CONFIG
 * with err (what names the config key). */
int ss_auth_list_has(const char *path, const char *what, const char *key, char *err,
                     size_t err_len);

/* Read the first key of a key file into key_out (Z85, 41 bytes). what names
 * the config key for messages. Returns 0 or SS_E_CONFIG with err. */
int ss_curve_read_key(const char *path, const char *what, char *key_out, char *err,
                      size_t err_len);

/* Admin token (security.admin_token_file): a shared secret that admin
 * requests (SHUTDOWN, CHECKPOINT, CHECKPOINT_DONE, INIT) carry in the
 * header's admin_token, for jobs without CURVE (issue 22: any local process
 * could stop a job). Longest token, with its NUL: SS_ADMIN_TOKEN_MAX. */

/* Read the token of path (its first line, 16..128 printable characters)
 * into out (SS_ADMIN_TOKEN_MAX bytes); path "" gives "" (no token). A file
 * that other users may read or write is refused. Returns 0 or SS_E_CONFIG
 * with err naming the file. Any thread. */
int ss_admin_token_read(const char *path, char *out, char *err, size_t err_len);

/* 1 when got (may be NULL) equals want, compared in constant time for
 * tokens of want's length; 1 also when want is "" (no token required). */
int ss_admin_token_ok(const char *want, const char *got);

typedef struct ss_auth ss_auth_t;

/* Counters of one ZAP handler. */
struct ss_auth_stats {
    uint64_t allowed;   /* handshakes of listed keys */
    uint64_t refused;   /* handshakes refused: key not listed, wrong secret, mechanism */
};

/* Start the ZAP handler of zctx on its own thread: with security.curve on
 * it reads the key lists of sec (security.authorized, security.admin_keys;
 * at least one key in all), else the secret of security.token_file (which
 * must be set); it binds inproc://zeromq.zap.01 and answers every handshake
 * of every CURVE or PLAIN server socket of zctx (a PLAIN peer is admitted
 * when its password is the secret, compared in constant time; admin
 * requests are then gated by security.admin_token_file alone). Returns the
 * handler once it is bound, or NULL with err (a file missing, malformed or
 * readable by others, no key at all, a handler already bound in zctx).
 * Caller owns it; ss_auth_destroy() it before zmq_ctx_term(zctx). Any
 * thread. */
ss_auth_t *ss_auth_new(void *zctx, const struct ss_security_cfg *sec, char *err,
                       size_t err_len);

/* Stop and join the handler thread, free everything; accepts NULL. */
void ss_auth_destroy(ss_auth_t **self_p);

/* Copy the counters. Any thread. */
void ss_auth_get_stats(const ss_auth_t *self, struct ss_auth_stats *st);

/* The client's public key (Z85) attached to a frame received on a CURVE
 * server socket, or NULL (no CURVE). Valid while frame is. Any thread. */
const char *ss_auth_frame_key(const zmq_msg_t *frame);

/* 1 when the frame's sender holds an admin key (see top), else 0. */
int ss_auth_frame_admin(const zmq_msg_t *frame);

/* 1 when endpoint can only be reached from this host (ipc://, inproc://,
 * tcp:// on 127.x.x.x, ::1, localhost or the lo interface), else 0. */
int ss_endpoint_is_local(const char *endpoint);

/* Log a warning naming the risk when endpoint, bound by what ("embedding
 * PS 0"), is reachable from other hosts and curve is off. */
void ss_auth_warn_plain_bind(const char *endpoint, int curve, const char *what);

#endif
