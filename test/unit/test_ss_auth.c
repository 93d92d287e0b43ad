/* test_ss_auth.c - unit tests of CURVE keys and the ZAP handler (ss_auth):
 * keygen files and modes, key and list files (labels, comments, bad lines
 * named by line), what ss_curve_load needs and refuses, and a CURVE ROUTER
 * over ipc:// that admits a listed key, marks the admin key, and never sees
 * a message from an unlisted key or a client without CURVE (counted); the
 * job token: a PLAIN ROUTER that admits only the secret of
 * security.token_file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#include "ss_auth.h"
#include "ss_cfg.h"
#include "ss_err.h"
#include "t.h"

struct fix {
    char dir[256];  /* scratch directory */
};

static int s_setup(void **state)
{
    static struct fix f;
    assert_int_equal(t_tmpdir(f.dir, sizeof f.dir, "auth"), 0);
    *state = &f;
    return 0;
}

static int s_teardown(void **state)
{
    struct fix *f = *state;
    t_rmtree(f->dir);
    return 0;
}

/* dir/name into out. */
static void s_path(const struct fix *f, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", f->dir, name);
}

static void s_write(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

/* Make NAME.key/.pub in the fixture dir; pub gets the public key. */
static void s_keygen(const struct fix *f, const char *name, char *pub)
{
    char base[300], path[320], err[512];
    s_path(f, name, base, sizeof base);
    assert_int_equal(ss_curve_keygen(base, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s.pub", base);
    assert_int_equal(ss_curve_read_key(path, "test", pub, err, sizeof err), 0);
}

static void test_keygen_files(void **state)
{
    struct fix *f = *state;
    char base[300], path[320], secret[41], pub[41], derived[41], err[512];
    struct stat st;
    s_keygen(f, "node", pub);
    s_path(f, "node", base, sizeof base);
    snprintf(path, sizeof path, "%s.key", base);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);                  /* the secret: owner only */
    assert_int_equal(ss_curve_read_key(path, "test", secret, err, sizeof err), 0);
    assert_int_equal(zmq_curve_public(derived, secret), 0);
    assert_string_equal(derived, pub);                         /* a pair */
    assert_int_not_equal(ss_curve_keygen(base, err, sizeof err), 0);  /* never overwrites */
    assert_non_null(strstr(err, "exists"));
    assert_int_equal(ss_curve_read_key(path, "test", derived, err, sizeof err), 0);
    assert_string_equal(derived, secret);                      /* still the same key */
}

static void test_key_lists(void **state)
{
    struct fix *f = *state;
    char a[41], b[41], c[41], list[300], text[512], err[512];
    s_keygen(f, "a", a);
    s_keygen(f, "b", b);
    s_keygen(f, "c", c);
    s_path(f, "list", list, sizeof list);
    snprintf(text, sizeof text, "# who may connect\n\n  %s  trainers\n#\n%s\n", a, b);
    s_write(list, text);
    assert_int_equal(ss_auth_list_has(list, "security.authorized", a, err, sizeof err), 1);
    assert_int_equal(ss_auth_list_has(list, "security.authorized", b, err, sizeof err), 1);
    assert_int_equal(ss_auth_list_has(list, "security.authorized", c, err, sizeof err), 0);
    snprintf(text, sizeof text, "%s\nnot-a-key\n", a);
    s_write(list, text);
    assert_int_equal(ss_auth_list_has(list, "security.authorized", a, err, sizeof err),
                     SS_E_CONFIG);
    assert_non_null(strstr(err, "security.authorized"));
    assert_non_null(strstr(err, "list:2:"));                   /* file and line */
    /* a list others may write is refused: they could add their key (issue 22) */
    snprintf(text, sizeof text, "%s\n", a);
    s_write(list, text);
    assert_int_equal(chmod(list, 0666), 0);
    assert_int_equal(ss_auth_list_has(list, "security.authorized", a, err, sizeof err),
                     SS_E_CONFIG);
    assert_non_null(strstr(err, "written by other users"));
    assert_int_equal(chmod(list, 0644), 0);
    assert_int_equal(ss_auth_list_has(list, "security.authorized", a, err, sizeof err), 1);
}

/* What each role needs, and the mistakes named. */
static void test_curve_load(void **state)
{
    struct fix *f = *state;
    struct ss_security_cfg sec = {0};
    struct ss_curve c;
    char spub[41], cpub[41], other[41], err[512];
    s_keygen(f, "server", spub);
    s_keygen(f, "client", cpub);
    s_keygen(f, "other", other);
    assert_int_equal(ss_curve_load(&c, &sec, SS_CURVE_CLIENT, err, sizeof err), 0);
    assert_int_equal(c.on, 0);                                 /* off: nothing read */
    sec.curve = 1;
    assert_int_equal(ss_curve_load(&c, &sec, SS_CURVE_SERVER, err, sizeof err), SS_E_CONFIG);
    assert_non_null(strstr(err, "security.server_key is not set"));
    s_path(f, "server.key", sec.server_key, sizeof sec.server_key);
    assert_int_equal(ss_curve_load(&c, &sec, SS_CURVE_SERVER, err, sizeof err), 0);
    assert_string_equal(c.server_public, spub);
    assert_int_equal(ss_curve_load(&c, &sec, SS_CURVE_CLIENT, err, sizeof err), SS_E_CONFIG);
    assert_non_null(strstr(err, "security.client_key"));
    s_path(f, "client.key", sec.client_key, sizeof sec.client_key);
    assert_int_equal(ss_curve_load(&c, &sec, SS_CURVE_CLIENT, err, sizeof err), 0);
    assert_string_equal(c.server_public, spub);                /* derived from server_key */
    assert_string_equal(c.client_public, cpub);
    assert_string_equal(c.server_secret, "");                  /* a client keeps no server secret */
    /* an operator's machine: server_public only, no server secret to read */
    s_path(f, "server.pub", sec.server_public, sizeof sec.server_public);
    s_path(f, "missing.key", sec.server_key, sizeof sec.server_key);
    assert_int_equal(ss_curve_load(&c, &sec, SS_CURVE_CLIENT, err, sizeof err), 0);
    assert_string_equal(c.server_public, spub);
    /* a server whose public file is another key's */
    s_path(f, "server.key", sec.server_key, sizeof sec.server_key);
    s_path(f, "other.pub", sec.server_public, sizeof sec.server_public);
    assert_int_equal(ss_curve_load(&c, &sec, SS_CURVE_SERVER, err, sizeof err), SS_E_CONFIG);
    assert_non_null(strstr(err, "is not the public key of"));
    assert_string_equal(c.server_secret, "");                  /* wiped on error */
    ss_curve_wipe(&c);
}

/* A CURVE client of ep with keys c; returns the socket. */
static void *s_client(void *zctx, const char *ep, const struct ss_curve *c)
{
    int linger = 0;
    void *s = zmq_socket(zctx, ZMQ_DEALER);
    assert_non_null(s);
    assert_int_equal(zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger), 0);
    assert_int_equal(ss_curve_client(s, c), 0);
    assert_int_equal(zmq_connect(s, ep), 0);
    assert_int_equal(zmq_send(s, "hi", 2, 0), 2);
    return s;
}

/* Receive [identity][body] within ms: the body frame's metadata. Returns 1
 * when a message came. */
static int s_take(void *router, int ms, char *key, int *admin)
{
    zmq_pollitem_t it = {router, 0, ZMQ_POLLIN, 0};
    zmq_msg_t id, body;
    if (zmq_poll(&it, 1, ms) <= 0)
        return 0;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    assert_true(zmq_msg_recv(&id, router, 0) >= 0);
    assert_true(zmq_msg_recv(&body, router, 0) >= 0);
    const char *k = ss_auth_frame_key(&body);
    snprintf(key, 41, "%s", k ? k : "");
    *admin = ss_auth_frame_admin(&body);
    zmq_msg_close(&id);
    zmq_msg_close(&body);
    return 1;
}

static void test_zap_handler(void **state)
{
    struct fix *f = *state;
    struct ss_security_cfg sec = {.curve = 1};
    struct ss_curve srv, user, admin, stranger, plain = {0};
    struct ss_auth_stats st;
    char upub[41], apub[41], spub[41], text[256], ep[320], key[41], err[512];
    int is_admin;
    void *zctx = zmq_ctx_new();
    s_keygen(f, "server", spub);
    s_keygen(f, "user", upub);
    s_keygen(f, "admin", apub);
    s_keygen(f, "stranger", text);
    s_path(f, "server.key", sec.server_key, sizeof sec.server_key);
    s_path(f, "authorized", sec.authorized, sizeof sec.authorized);
    s_path(f, "admins", sec.admin_keys, sizeof sec.admin_keys);
    snprintf(text, sizeof text, "%s user\n", upub);
    s_write(sec.authorized, text);
    snprintf(text, sizeof text, "%s admin\n", apub);
    s_write(sec.admin_keys, text);
    assert_int_equal(ss_curve_load(&srv, &sec, SS_CURVE_SERVER, err, sizeof err), 0);
    s_path(f, "user.key", sec.client_key, sizeof sec.client_key);
    assert_int_equal(ss_curve_load(&user, &sec, SS_CURVE_CLIENT, err, sizeof err), 0);
    s_path(f, "admin.key", sec.client_key, sizeof sec.client_key);
    assert_int_equal(ss_curve_load(&admin, &sec, SS_CURVE_CLIENT, err, sizeof err), 0);
    s_path(f, "stranger.key", sec.client_key, sizeof sec.client_key);
    assert_int_equal(ss_curve_load(&stranger, &sec, SS_CURVE_CLIENT, err, sizeof err), 0);

    ss_auth_t *auth = ss_auth_new(zctx, &sec, err, sizeof err);
    assert_non_null(auth);
    assert_null(ss_auth_new(zctx, &sec, err, sizeof err));    /* one handler per context */
    void *router = zmq_socket(zctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(ss_curve_server(router, &srv), 0);
    snprintf(ep, sizeof ep, "ipc://%s/sock", f->dir);
    assert_int_equal(zmq_bind(router, ep), 0);

    void *c1 = s_client(zctx, ep, &user);
    assert_int_equal(s_take(router, 3000, key, &is_admin), 1);
    assert_string_equal(key, upub);
    assert_int_equal(is_admin, 0);                             /* admin_keys are set */
    void *c2 = s_client(zctx, ep, &admin);
    assert_int_equal(s_take(router, 3000, key, &is_admin), 1);
    assert_string_equal(key, apub);                            /* admitted though not in */
    assert_int_equal(is_admin, 1);                             /* authorized: it is an admin */
    void *c3 = s_client(zctx, ep, &stranger);
    void *c4 = s_client(zctx, ep, &plain);
    assert_int_equal(s_take(router, 500, key, &is_admin), 0);  /* neither gets through */
    ss_auth_get_stats(auth, &st);
    assert_int_equal(st.allowed, 2);
    assert_true(st.refused >= 1);                              /* the stranger, each retry */

    zmq_close(c1);
    zmq_close(c2);
    zmq_close(c3);
    zmq_close(c4);
    zmq_close(router);
    ss_auth_destroy(&auth);
    assert_null(auth);
    ss_auth_destroy(&auth);                                    /* accepts NULL */
    zmq_ctx_term(zctx);
    ss_curve_wipe(&srv);
}

/* No key may connect at all: refused at start, naming the key to set. */
static void test_zap_needs_keys(void **state)
{
    struct fix *f = *state;
    struct ss_security_cfg sec = {.curve = 1};
    char err[512];
    void *zctx = zmq_ctx_new();
    s_path(f, "empty", sec.authorized, sizeof sec.authorized);
    s_write(sec.authorized, "# nobody yet\n");
    assert_null(ss_auth_new(zctx, &sec, err, sizeof err));
    assert_non_null(strstr(err, "security.authorized"));
    s_path(f, "missing", sec.authorized, sizeof sec.authorized);
    assert_null(ss_auth_new(zctx, &sec, err, sizeof err));
    assert_non_null(strstr(err, "cannot read"));
    zmq_ctx_term(zctx);
}

/* The job token (security.token_file, CURVE off): ss_curve_load reads it
 * for every role, a file others can read is refused, and a PLAIN ROUTER
 * takes messages only from a client showing the secret: a wrong secret and
 * a client without one (NULL mechanism) never get a frame through. */
static void test_zap_token(void **state)
{
    struct fix *f = *state;
    struct ss_security_cfg sec = {0};
    struct ss_curve srv, good, bad = {0}, none = {0};
    struct ss_auth_stats st;
    char ep[320], key[41], err[512];
    int is_admin, linger = 0;
    void *zctx = zmq_ctx_new();

    assert_null(ss_auth_new(zctx, &sec, err, sizeof err));     /* no CURVE, no token */
    assert_non_null(strstr(err, "security.token_file"));
    s_path(f, "job.token", sec.token_file, sizeof sec.token_file);
    s_write(sec.token_file, "0123456789abcdef0123456789abcdef\n");
    chmod(sec.token_file, 0644);
    assert_int_equal(ss_curve_load(&srv, &sec, SS_CURVE_SERVER, err, sizeof err), SS_E_CONFIG);
    assert_non_null(strstr(err, "security.token_file"));
    assert_non_null(strstr(err, "mode 644"));
    assert_int_equal(srv.plain, 0);
    assert_null(ss_auth_new(zctx, &sec, err, sizeof err));
    chmod(sec.token_file, 0600);
    assert_int_equal(ss_curve_load(&srv, &sec, SS_CURVE_SERVER, err, sizeof err), 0);
    assert_int_equal(srv.on, 0);
    assert_int_equal(srv.plain, 1);
    assert_int_equal(ss_curve_secured(&srv), 1);
    assert_int_equal(ss_curve_secured(&none), 0);
    assert_int_equal(ss_curve_secured(NULL), 0);
    assert_string_equal(srv.token, "0123456789abcdef0123456789abcdef");
    assert_int_equal(ss_curve_load(&good, &sec, SS_CURVE_CLIENT, err, sizeof err), 0);
    bad = good;
    bad.token[0] = '1';                                       /* one character off */

    ss_auth_t *auth = ss_auth_new(zctx, &sec, err, sizeof err);
    assert_non_null(auth);
    void *router = zmq_socket(zctx, ZMQ_ROUTER);
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(ss_curve_server(router, &srv), 0);
    snprintf(ep, sizeof ep, "ipc://%s/plain", f->dir);
    assert_int_equal(zmq_bind(router, ep), 0);

    void *c1 = s_client(zctx, ep, &good);
    assert_int_equal(s_take(router, 3000, key, &is_admin), 1);
    assert_string_equal(key, "token");                        /* the ZAP reply's user id */
    assert_int_equal(is_admin, 1);                            /* admin_token_file decides */
    void *c2 = s_client(zctx, ep, &bad);
    void *c3 = s_client(zctx, ep, &none);
    assert_int_equal(s_take(router, 700, key, &is_admin), 0);  /* neither gets through */
    ss_auth_get_stats(auth, &st);
    assert_int_equal(st.allowed, 1);
    assert_true(st.refused >= 1);                             /* the wrong secret, each retry */

    zmq_close(c1);
    zmq_close(c2);
    zmq_close(c3);
    zmq_close(router);
    ss_auth_destroy(&auth);
    zmq_ctx_term(zctx);
    ss_curve_wipe(&srv);
    assert_string_equal(srv.token, "");
    ss_curve_wipe(&good);
}

static void test_endpoint_is_local(void **state)
{
    (void)state;
    assert_int_equal(ss_endpoint_is_local("tcp://127.0.0.1:5555"), 1);
    assert_int_equal(ss_endpoint_is_local("tcp://127.1.2.3:5555"), 1);
    assert_int_equal(ss_endpoint_is_local("tcp://localhost:5555"), 1);
    assert_int_equal(ss_endpoint_is_local("tcp://[::1]:5555"), 1);
    assert_int_equal(ss_endpoint_is_local("tcp://lo:5555"), 1);
    assert_int_equal(ss_endpoint_is_local("ipc:///tmp/x"), 1);
    assert_int_equal(ss_endpoint_is_local("inproc://x"), 1);
    assert_int_equal(ss_endpoint_is_local("tcp://*:5555"), 0);
    assert_int_equal(ss_endpoint_is_local("tcp://0.0.0.0:5555"), 0);
    assert_int_equal(ss_endpoint_is_local("tcp://10.0.0.7:5555"), 0);
    assert_int_equal(ss_endpoint_is_local("tcp://eth0:5555"), 0);
    assert_int_equal(ss_endpoint_is_local("tcp://[::]:5555"), 0);
    assert_int_equal(ss_endpoint_is_local("tcp://node7:5555"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keygen_files, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_key_lists, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_curve_load, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_zap_handler, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_zap_needs_keys, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_zap_token, s_setup, s_teardown),
        cmocka_unit_test(test_endpoint_is_local),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
