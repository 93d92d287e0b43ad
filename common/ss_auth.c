/* ss_auth.c - CURVE key files, the job token, socket set-up and the ZAP
 * handler.
 *
 * DESIGN: the ZAP handler is a thread owning one REP socket bound at
 * inproc://zeromq.zap.01 (ZeroMQ asks it about every handshake of a CURVE or
 * PLAIN server socket in the same context). The key lists (or the token)
 * are read once, the lists sorted and searched with bsearch; they are
 * immutable while the thread runs, so only the counters are shared (relaxed
 * atomics). The thread polls with a short timeout and leaves when the stop
 * flag is set. */
#include "ss_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"

#define S_ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define S_ZAP_FRAMES 8          /* frames of a ZAP request we read at most */
#define S_ZAP_FRAME_MAX 256     /* bytes kept of each */
#define S_POLL_MS 50            /* stop-flag latency of the handler thread */
#define S_LINE_MAX 1024         /* longest line of a key file */

/* A sorted list of 32-byte public keys. */
struct s_keyset {
    uint8_t (*keys)[32];        /* n keys, sorted by memcmp */
    size_t n;                   /* count */
};

struct ss_auth {
    void *zctx;                      /* borrowed: the context served */
    pthread_t tid;                   /* the handler thread */
    int started;                     /* tid is running */
    atomic_int stop;                 /* tells the thread to leave */
    atomic_int state;                /* 0 starting, 1 bound, -1 bind failed */
    struct s_keyset allowed;         /* security.authorized */
    struct s_keyset admins;          /* security.admin_keys */
    int plain;                       /* curve off: PLAIN peers showing token */
    char token[SS_ADMIN_TOKEN_MAX];  /* plain: security.token_file's secret */
    char authorized_path[SS_CFG_MAX_STR]; /* for messages */
    _Atomic uint64_t n_allowed;      /* handshakes accepted */
    _Atomic uint64_t n_refused;      /* handshakes refused */
};

static int s_token_read(const char *path, const char *what, char *out, char *err,
                        size_t err_len);

/* ------------------------------------------------------------ key files */

/* Parse one line: 1 with the key in out (Z85, 41 bytes), 0 for a blank or
 * comment line, -1 for anything else. Modifies line. */
static int s_parse_line(char *line, char *out)
{
    uint8_t raw[32];
    char *p = line, *end;
    while (*p == ' ' || *p == '\t')
        p++;
    for (end = p; *end && *end != '\n' && *end != '\r'; end++)
        ;
    *end = '\0';
    if (!*p || (p[0] == '#' && (p[1] == '\0' || p[1] == ' ' || p[1] == '\t')))
        return 0;
    size_t n = strcspn(p, " \t");
    if (n != SS_Z85_KEY_LEN)
        return -1;
    p[n] = '\0';
    if (!zmq_z85_decode(raw, p))
        return -1;
    memcpy(out, p, SS_Z85_KEY_LEN + 1);
    return 1;
}

/* Call fn(arg, key) for every key of path; what names the config key.
 * Returns 0 or SS_E_CONFIG with err ("FILE:LINE: ..."). */
static int s_each_key(const char *path, const char *what, int (*fn)(void *, const char *),
                      void *arg, char *err, size_t len)
{
    char line[S_LINE_MAX], key[SS_Z85_KEY_LEN + 1];
    size_t lineno = 0;
    int rc = 0;
    FILE *f = fopen(path, "r");
    struct stat st;
    if (!f) {
        snprintf(err, len, "%s: cannot read %s: %s", what, path, strerror(errno));
        return SS_E_CONFIG;
    }
    /* a key list others may write lets them add their own key (issue 22) */
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 022)) {
        snprintf(err, len, "%s: %s can be written by other users (mode %03o): refused; "
                 "chmod go-w it", what, path, (unsigned)(st.st_mode & 0777));
        fclose(f);
        return SS_E_CONFIG;
    }
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        int got = s_parse_line(line, key);
        if (got < 0) {
            snprintf(err, len, "%s: %s:%zu: not a 40-character Z85 CURVE key (make keys with "
                     "'shadow-ctl keygen NAME')", what, path, lineno);
            rc = SS_E_CONFIG;
        } else if (got > 0 && fn(arg, key) != 0) {
            snprintf(err, len, "%s: %s:%zu: more than %d keys", what, path, lineno,
                     SS_AUTH_MAX_KEYS);
            rc = SS_E_CONFIG;
        }
    }
    fclose(f);
    return rc;
}

/* s_each_key callback: keep the first key only. */
static int s_first_key(void *arg, const char *key)
{
    char *out = arg;
    if (!out[0])
        memcpy(out, key, SS_Z85_KEY_LEN + 1);
    return 0;
}

int ss_curve_read_key(const char *path, const char *what, char *key_out, char *err,
                      size_t err_len)
{
    key_out[0] = '\0';
    if (!path[0]) {
        snprintf(err, err_len, "%s is not set (security.curve is on)", what);
        return SS_E_CONFIG;
    }
    int rc = s_each_key(path, what, s_first_key, key_out, err, err_len);
    if (rc == 0 && !key_out[0]) {
        snprintf(err, err_len, "%s: %s holds no key", what, path);
        rc = SS_E_CONFIG;
    }
    return rc;
}

/* Read a secret key file into secret and derive its public key; warns when
 * the file is readable by others. */
static int s_read_secret(const char *path, const char *what, char *secret, char *public,
                         char *err, size_t len)
{
    struct stat st;
    int rc = ss_curve_read_key(path, what, secret, err, len);
    if (rc)
        return rc;
    if (stat(path, &st) == 0 && (st.st_mode & 077))
        SS_LOG(SS_LOG_WARN, "%s: secret key file %s can be read by other users (mode %03o): "
               "chmod 600 it", what, path, (unsigned)(st.st_mode & 0777));
    if (zmq_curve_public(public, secret) != 0) {
        snprintf(err, len, "%s: %s: cannot derive the public key: %s", what, path,
                 zmq_strerror(zmq_errno()));
        return SS_E_CONFIG;
    }
    return 0;
}

/* The servers' public key for a client: security.server_public, else the
 * one derived from security.server_key (by a process that is a server too,
 * or read here). A server given both checks that they match; a client
 * given server_public never reads the secret server key. */
static int s_server_public(struct ss_curve *c, const struct ss_security_cfg *sec, char *err,
                           size_t len)
{
    char pub[SS_Z85_KEY_LEN + 1], secret[SS_Z85_KEY_LEN + 1];
    int rc;
    if (sec->server_public[0]) {
        if ((rc = ss_curve_read_key(sec->server_public, "security.server_public", pub, err,
                                    len)) != 0)
            return rc;
        if (c->server_public[0] && strcmp(pub, c->server_public) != 0) {
            snprintf(err, len, "security.server_public (%s) is not the public key of "
                     "security.server_key (%s)", sec->server_public, sec->server_key);
            return SS_E_CONFIG;
        }
        memcpy(c->server_public, pub, sizeof c->server_public);
        return 0;
    }
    if (c->server_public[0])
        return 0;
    if (!sec->server_key[0]) {
        snprintf(err, len, "security.server_public is not set: a client needs the servers' "
                 "public key (the NAME.pub of security.server_key)");
        return SS_E_CONFIG;
    }
    rc = s_read_secret(sec->server_key, "security.server_key", secret, c->server_public, err,
                       len);
    explicit_bzero(secret, sizeof secret);
    return rc;
}

int ss_curve_load(struct ss_curve *c, const struct ss_security_cfg *sec, unsigned roles,
                  char *err, size_t err_len)
{
    int rc = 0;
    ss_assert(c && sec && roles);
    memset(c, 0, sizeof *c);
    if (!sec->curve) {
        if (!sec->token_file[0])
            return 0;
        rc = s_token_read(sec->token_file, "security.token_file", c->token, err, err_len);
        c->plain = rc == 0;
        return rc;
    }
    if (sec->token_file[0])
        SS_LOG(SS_LOG_INFO, "security.token_file is not used: CURVE authenticates every "
               "connection by its key");
    if (!zmq_has("curve")) {
        snprintf(err, err_len, "security.curve is on, but this libzmq has no CURVE support "
                 "(it was built without libsodium): install a libzmq with CURVE");
        return SS_E_CONFIG;
    }
    c->on = 1;
    if (roles & SS_CURVE_SERVER)
        rc = s_read_secret(sec->server_key, "security.server_key", c->server_secret,
                           c->server_public, err, err_len);
    if (rc == 0 && ((roles & SS_CURVE_CLIENT) || sec->server_public[0]))
        rc = s_server_public(c, sec, err, err_len);
    if (rc == 0 && (roles & SS_CURVE_CLIENT))
        rc = s_read_secret(sec->client_key, "security.client_key", c->client_secret,
                           c->client_public, err, err_len);
    if (rc)
        ss_curve_wipe(c);
    return rc;
}

void ss_curve_wipe(struct ss_curve *c)
{
    explicit_bzero(c->server_secret, sizeof c->server_secret);
    explicit_bzero(c->client_secret, sizeof c->client_secret);
    explicit_bzero(c->token, sizeof c->token);
}

int ss_curve_secured(const struct ss_curve *c)
{
    return c && (c->on || c->plain);
}

int ss_curve_server(void *sock, const struct ss_curve *c)
{
    int one = 1;
    if (!ss_curve_secured(c))
        return 0;
    if (!c->on)  /* PLAIN: the ZAP handler checks the password */
        return zmq_setsockopt(sock, ZMQ_PLAIN_SERVER, &one, sizeof one) ||
               zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, SS_AUTH_DOMAIN, strlen(SS_AUTH_DOMAIN))
                   ? SS_E_NET : 0;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, c->server_secret, SS_Z85_KEY_LEN) ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, SS_AUTH_DOMAIN, strlen(SS_AUTH_DOMAIN)))
        return SS_E_NET;
    return 0;
}

int ss_curve_client(void *sock, const struct ss_curve *c)
{
    if (!ss_curve_secured(c))
        return 0;
    if (!c->on)
        return zmq_setsockopt(sock, ZMQ_PLAIN_USERNAME, SS_AUTH_DOMAIN, strlen(SS_AUTH_DOMAIN)) ||
               zmq_setsockopt(sock, ZMQ_PLAIN_PASSWORD, c->token, strlen(c->token))
                   ? SS_E_NET : 0;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, c->server_public, SS_Z85_KEY_LEN) ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, c->client_public, SS_Z85_KEY_LEN) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, c->client_secret, SS_Z85_KEY_LEN))
        return SS_E_NET;
    return 0;
}

/* Create path (never overwriting) with mode and write text. */
static int s_write_new(const char *path, int mode, const char *text, char *err, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0) {
        snprintf(err, len, "cannot create %s: %s%s", path, strerror(errno),
                 errno == EEXIST ? " (remove it first, or pick another name)" : "");
        return SS_E_IO;
    }
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok) {
        snprintf(err, len, "cannot write %s: %s", path, strerror(errno));
        unlink(path);
        return SS_E_IO;
    }
    return 0;
}

int ss_curve_keygen(const char *name, char *err, size_t err_len)
{
    char pub[SS_Z85_KEY_LEN + 1], secret[SS_Z85_KEY_LEN + 1];
    char key_path[SS_CFG_MAX_STR], pub_path[SS_CFG_MAX_STR], text[512];
    const char *label = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    int rc;
    if (!zmq_has("curve") || zmq_curve_keypair(pub, secret) != 0) {
        snprintf(err, err_len, "this libzmq cannot make CURVE keys (built without libsodium)");
        return SS_E_CONFIG;
    }
    if (!*label || snprintf(key_path, sizeof key_path, "%s.key", name) >= (int)sizeof key_path ||
        snprintf(pub_path, sizeof pub_path, "%s.pub", name) >= (int)sizeof pub_path) {
        snprintf(err, err_len, "bad key name '%s'", name);
        return SS_E_CONFIG;
    }
    snprintf(text, sizeof text, "# ShadowSync CURVE secret key '%s': keep it private\n%s\n",
             label, secret);
    rc = s_write_new(key_path, 0600, text, err, err_len);
    explicit_bzero(text, sizeof text);
    explicit_bzero(secret, sizeof secret);
    if (rc)
        return rc;
    snprintf(text, sizeof text, "%s %s\n", pub, label);
    if ((rc = s_write_new(pub_path, 0644, text, err, err_len)) != 0)
        unlink(key_path);
    return rc;
}

/* ------------------------------------------------------------ key lists */

static int s_key_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 32);
}

/* s_each_key callback: append the decoded key to a keyset. */
static int s_add_key(void *arg, const char *key)
{
    struct s_keyset *ks = arg;
    if (ks->n == SS_AUTH_MAX_KEYS)
        return -1;
    if ((ks->n & (ks->n - 1)) == 0)  /* 0, 1, 2, 4, ...: grow */
        ks->keys = ss_realloc(ks->keys, (ks->n ? 2 * ks->n : 1) * sizeof *ks->keys);
    zmq_z85_decode(ks->keys[ks->n++], key);
    return 0;
}

/* Read list file path (empty: no keys) into ks, sorted. */
static int s_load_keyset(struct s_keyset *ks, const char *path, const char *what, char *err,
                         size_t len)
{
    if (!path[0])
        return 0;
    int rc = s_each_key(path, what, s_add_key, ks, err, len);
    if (rc == 0 && ks->n)
        qsort(ks->keys, ks->n, sizeof *ks->keys, s_key_cmp);
    return rc;
}

static int s_has_key(const struct s_keyset *ks, const uint8_t *key)
{
    return ks->n && bsearch(key, ks->keys, ks->n, sizeof *ks->keys, s_key_cmp) != NULL;
}

int ss_auth_list_has(const char *path, const char *what, const char *key, char *err,
                     size_t err_len)
{
    struct s_keyset ks = {0};
    uint8_t raw[32];
    if (!zmq_z85_decode(raw, key)) {
        snprintf(err, err_len, "'%s' is not a Z85 key", key);
        return SS_E_CONFIG;
    }
    int rc = s_load_keyset(&ks, path, what, err, err_len);
    if (rc == 0)
        rc = s_has_key(&ks, raw);
    ss_free(ks.keys);
    return rc;
}

/* ------------------------------------------------------------ ZAP handler */

/* One ZAP request's frames (RFC 27): version, request id, domain, address,
 * routing id, mechanism, credentials. */
struct s_zap_req {
    char f[S_ZAP_FRAMES][S_ZAP_FRAME_MAX]; /* frame bytes, truncated */
    size_t n[S_ZAP_FRAMES];                /* frame sizes as received */
    size_t count;                          /* frames received */
};

/* Receive one whole request (extra frames are read and dropped). */
static int s_zap_recv(void *sock, struct s_zap_req *r)
{
    int more = 1;
    size_t sz;
    r->count = 0;
    while (more) {
        char buf[S_ZAP_FRAME_MAX];
        int n = zmq_recv(sock, buf, sizeof buf, 0);
        if (n < 0)
            return SS_E_NET;
        if (r->count < S_ZAP_FRAMES) {
            size_t keep = (size_t)n < sizeof buf ? (size_t)n : sizeof buf;
            memcpy(r->f[r->count], buf, keep);
            r->n[r->count++] = (size_t)n;
        }
        sz = sizeof more;
        if (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) != 0)
            return SS_E_NET;
    }
    return 0;
}

/* Send the reply: status "200"/"400", text, user id and metadata. */
static void s_zap_reply(void *sock, const struct s_zap_req *r, int ok, const char *text,
                        const char *user, int admin)
{
    /* one ZMTP property: name length, name, 4-byte big-endian value length, value */
    static const uint8_t admin_prop[] = {7, 'X', '-', 'A', 'd', 'm', 'i', 'n', 0, 0, 0, 1, '1'};
    static const uint8_t user_prop[] = {7, 'X', '-', 'A', 'd', 'm', 'i', 'n', 0, 0, 0, 1, '0'};
    size_t id_len = r->count > 1 ? r->n[1] : 0;
    if (id_len > S_ZAP_FRAME_MAX)
        id_len = S_ZAP_FRAME_MAX;
    zmq_send(sock, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(sock, r->f[1], id_len, ZMQ_SNDMORE);
    zmq_send(sock, ok ? "200" : "400", 3, ZMQ_SNDMORE);
    zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(sock, user, strlen(user), ZMQ_SNDMORE);
    if (ok)
        zmq_send(sock, admin ? admin_prop : user_prop, sizeof admin_prop, 0);
    else
        zmq_send(sock, "", 0, 0);
}

/* Log a refusal: the first ten, then every 1000th (a client retrying with
 * a wrong key reconnects ten times a second). */
static void s_log_refusal(ss_auth_t *self, const struct s_zap_req *r, const char *why)
{
    uint64_t n = atomic_fetch_add_explicit(&self->n_refused, 1, memory_order_relaxed) + 1;
    if (n <= 10 || n % 1000 == 0)
        SS_LOG(SS_LOG_WARN, "refused a connection from %.*s: %s [%llu refused so far]",
               (int)(r->count > 3 && r->n[3] < S_ZAP_FRAME_MAX ? r->n[3] : 0), r->f[3], why,
               (unsigned long long)n);
}

/* Decide a PLAIN request (frames 6 and 7: user name, password): admitted
 * when the password is the job's secret. The refusal tells the peer only
 * "400" (ZeroMQ sends the status code alone). */
static void s_zap_plain(ss_auth_t *self, void *sock, const struct s_zap_req *r)
{
    char pw[S_ZAP_FRAME_MAX + 1];
    int plain = r->count >= 8 && r->n[5] == 5 && memcmp(r->f[5], "PLAIN", 5) == 0;
    size_t n = plain && r->n[7] < S_ZAP_FRAME_MAX ? r->n[7] : 0;
    memcpy(pw, r->f[7], n);
    pw[n] = '\0';
    int ok = plain && n > 0 && ss_admin_token_ok(self->token, pw);
    explicit_bzero(pw, sizeof pw);
    if (!ok) {
        s_log_refusal(self, r, plain ? "wrong job token (security.token_file)"
                                     : "not a PLAIN handshake (security.token_file is set)");
        s_zap_reply(sock, r, 0, "refused", "", 0);
        return;
    }
    atomic_fetch_add_explicit(&self->n_allowed, 1, memory_order_relaxed);
    /* admin: the admin token in each request's header decides (ss_auth.h) */
    s_zap_reply(sock, r, 1, "OK", "token", 1);
}

/* Decide one request and answer it. */
static void s_zap_handle(ss_auth_t *self, void *sock, const struct s_zap_req *r)
{
    char key[SS_Z85_KEY_LEN + 1], why[SS_CFG_MAX_STR + 96];
    int curve = r->count >= 7 && r->n[5] == 5 && memcmp(r->f[5], "CURVE", 5) == 0 &&
                r->n[6] == 32;
    if (r->count < 6 || r->n[0] != 3 || memcmp(r->f[0], "1.0", 3) != 0) {
        s_log_refusal(self, r, "malformed ZAP request");
        s_zap_reply(sock, r, 0, "malformed ZAP request", "", 0);
        return;
    }
    if (self->plain) {
        s_zap_plain(self, sock, r);
        return;
    }
    if (!curve) {
        s_log_refusal(self, r, "not a CURVE handshake (security.curve is on)");
        s_zap_reply(sock, r, 0, "CURVE required", "", 0);
        return;
    }
    const uint8_t *raw = (const uint8_t *)r->f[6];
    zmq_z85_encode(key, raw, 32);
    int admin = self->admins.n == 0 || s_has_key(&self->admins, raw);
    if (!s_has_key(&self->allowed, raw) && !s_has_key(&self->admins, raw)) {
        snprintf(why, sizeof why, "client key %s is not in security.authorized (%s)", key,
                 self->authorized_path[0] ? self->authorized_path : "not set");
        s_log_refusal(self, r, why);
        s_zap_reply(sock, r, 0, "key not authorized", "", 0);
        return;
    }
    atomic_fetch_add_explicit(&self->n_allowed, 1, memory_order_relaxed);
    SS_LOG(SS_LOG_DEBUG, "accepted key %s%s from %.*s", key, admin ? " (admin)" : "",
           (int)(r->n[3] < S_ZAP_FRAME_MAX ? r->n[3] : 0), r->f[3]);
    s_zap_reply(sock, r, 1, "OK", key, admin);
}

static void *s_zap_main(void *arg)
{
    ss_auth_t *self = arg;
    int linger = 0;
    ss_log_thread("zap");
    void *sock = zmq_socket(self->zctx, ZMQ_REP);
    if (!sock || zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_bind(sock, S_ZAP_ENDPOINT) != 0) {
        SS_LOG(SS_LOG_ERROR, "ZAP handler: cannot bind %s: %s", S_ZAP_ENDPOINT,
               zmq_strerror(zmq_errno()));
        if (sock)
            zmq_close(sock);
        atomic_store(&self->state, -1);
        return NULL;
    }
    atomic_store(&self->state, 1);
    while (!atomic_load(&self->stop)) {
        zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
        struct s_zap_req req;
        if (zmq_poll(&item, 1, S_POLL_MS) <= 0)
            continue;
        if (s_zap_recv(sock, &req) == 0)
            s_zap_handle(self, sock, &req);
    }
    zmq_close(sock);
    return NULL;
}

ss_auth_t *ss_auth_new(void *zctx, const struct ss_security_cfg *sec, char *err,
                       size_t err_len)
{
    ss_assert(zctx && sec && err);
    ss_auth_t *self = ss_calloc(1, sizeof *self);
    self->zctx = zctx;
    self->plain = !sec->curve;
    snprintf(self->authorized_path, sizeof self->authorized_path, "%s", sec->authorized);
    if (self->plain) {
        if (!sec->token_file[0]) {
            snprintf(err, err_len, "a ZAP handler without CURVE needs security.token_file");
            goto fail;
        }
        if (s_token_read(sec->token_file, "security.token_file", self->token, err, err_len))
            goto fail;
    } else if (s_load_keyset(&self->allowed, sec->authorized, "security.authorized", err,
                             err_len) ||
               s_load_keyset(&self->admins, sec->admin_keys, "security.admin_keys", err,
                             err_len)) {
        goto fail;
    }
    if (!self->plain && self->allowed.n + self->admins.n == 0) {
        snprintf(err, err_len, "security.curve is on but no client key may connect: list "
                 "public keys in security.authorized (%s)",
                 sec->authorized[0] ? sec->authorized : "not set");
        goto fail;
    }
    if (pthread_create(&self->tid, NULL, s_zap_main, self) != 0) {
        snprintf(err, err_len, "cannot start the ZAP handler thread");
        goto fail;
    }
    self->started = 1;
    while (atomic_load(&self->state) == 0)
        usleep(1000);
    if (atomic_load(&self->state) < 0) {
        snprintf(err, err_len, "cannot bind the ZAP handler at %s (another one in this "
                 "context?)", S_ZAP_ENDPOINT);
        goto fail;
    }
    if (self->plain)
        SS_LOG(SS_LOG_INFO, "job token on: every connection must show the secret of "
               "security.token_file at its handshake (ZeroMQ PLAIN)");
    else
        SS_LOG(SS_LOG_INFO, "CURVE on: %zu authorized key%s, %s", self->allowed.n,
               self->allowed.n == 1 ? "" : "s",
               self->admins.n ? "admin requests from security.admin_keys only"
                              : "admin requests from any of them (security.admin_keys empty)");
    return self;
fail:
    ss_auth_destroy(&self);
    return NULL;
}

void ss_auth_destroy(ss_auth_t **self_p)
{
    ss_auth_t *self = *self_p;
    if (!self)
        return;
    atomic_store(&self->stop, 1);
    if (self->started)
        ss_assert(pthread_join(self->tid, NULL) == 0);
    ss_free(self->allowed.keys);
    ss_free(self->admins.keys);
    explicit_bzero(self->token, sizeof self->token);
    ss_free(self);
    *self_p = NULL;
}

void ss_auth_get_stats(const ss_auth_t *self, struct ss_auth_stats *st)
{
    st->allowed = atomic_load_explicit(&self->n_allowed, memory_order_relaxed);
    st->refused = atomic_load_explicit(&self->n_refused, memory_order_relaxed);
}

const char *ss_auth_frame_key(const zmq_msg_t *frame)
{
    const char *key = zmq_msg_gets(frame, "User-Id");
    return key && *key ? key : NULL;
}

int ss_auth_frame_admin(const zmq_msg_t *frame)
{
    const char *v = zmq_msg_gets(frame, "X-Admin");
    return v && v[0] == '1';
}

/* ------------------------------------------------------------ endpoints */

int ss_endpoint_is_local(const char *ep)
{
    char host[SS_CFG_MAX_STR];
    if (!strncmp(ep, "ipc://", 6) || !strncmp(ep, "inproc://", 9))
        return 1;
    if (strncmp(ep, "tcp://", 6) != 0)
        return 0;
    snprintf(host, sizeof host, "%s", ep + 6);
    char *colon = strrchr(host, ':');  /* the port */
    if (colon)
        *colon = '\0';
    char *semi = strchr(host, ';');    /* "source;destination": keep the bound side */
    if (semi)
        *semi = '\0';
    return !strncmp(host, "127.", 4) || !strcmp(host, "localhost") || !strcmp(host, "[::1]") ||
           !strcmp(host, "::1") || !strcmp(host, "lo");
}

void ss_auth_warn_plain_bind(const char *endpoint, int curve, const char *what)
{
    if (curve || ss_endpoint_is_local(endpoint))
        return;
    SS_LOG(SS_LOG_WARN, "%s binds %s, which other hosts can reach, without CURVE "
           "(security.curve is off): anything that reaches this port can read and change the "
           "model or stop the job; bind 127.0.0.1 only, or turn security.curve on (README, "
           "'Security')", what, endpoint);
}

/* Read the secret of token file path (what: its config key) into out. */
static int s_token_read(const char *path, const char *what, char *out, char *err,
                        size_t err_len)
{
    char line[SS_ADMIN_TOKEN_MAX + 2] = "";
    struct stat st;
    out[0] = '\0';
    if (!path[0])
        return 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_len, "%s: cannot read %s: %s", what, path, strerror(errno));
        return SS_E_CONFIG;
    }
    int loose = fstat(fileno(f), &st) == 0 && (st.st_mode & 077);
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (loose) {
        explicit_bzero(line, sizeof line);
        snprintf(err, err_len, "%s: %s can be read or written by other users (mode %03o): "
                 "refused; chmod 600 it", what, path, (unsigned)(st.st_mode & 0777));
        return SS_E_CONFIG;
    }
    size_t n = got ? strcspn(line, "\r\n") : 0;
    line[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (line[i] <= ' ' || line[i] > '~')
            n = 0;
    if (n < 16 || n >= SS_ADMIN_TOKEN_MAX) {
        explicit_bzero(line, sizeof line);
        snprintf(err, err_len, "%s: %s does not hold a token (one line of 16 to %d printable "
                 "characters)", what, path, SS_ADMIN_TOKEN_MAX - 1);
        return SS_E_CONFIG;
    }
    memcpy(out, line, n + 1);
    explicit_bzero(line, sizeof line);
    return 0;
}

int ss_admin_token_read(const char *path, char *out, char *err, size_t err_len)
{
    return s_token_read(path, "security.admin_token_file", out, err, err_len);
}

int ss_admin_token_ok(const char *want, const char *got)
{
    size_t n = strlen(want);
    if (n == 0)
        return 1;
    if (!got || strlen(got) != n)
        return 0;
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(want[i] ^ got[i]);
    return diff == 0;
}
