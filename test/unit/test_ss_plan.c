/* test_ss_plan.c - unit tests of the launch plan (ss_plan): the hosts file
 * (roles, comments, addr=, IPv4 and IPv6 addresses, user@host), its errors
 * naming file and line, round-robin placement by role, the endpoints
 * (ipc://, a base port with a PS's port span, free ports, IPv6 in
 * brackets, too few ports), --fixed-ports placement by address, and
 * ss_endpoint_split().
 *
 * No test asks a name server: names are IP literals, "localhost" (the
 * hosts file of this machine), or a 64-byte label the resolver refuses
 * before any query (as test_ss_cluster.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_plan.h"
#include "t.h"

/* A host name that cannot resolve, without a DNS query (see the top). */
#define NO_SUCH_HOST "no-such-host-0123456789012345678901234567890123456789012345678901.invalid"

#define EMB (1u << SS_CLUSTER_EMBEDDING)
#define SYN (1u << SS_CLUSTER_SYNC)
#define TRN (1u << SS_CLUSTER_TRAINER)

/* A plan of text's hosts, asserted parsed. Caller destroys. */
static ss_plan_t *s_hosts(const char *text)
{
    char err[512] = "";
    ss_plan_t *p = ss_plan_new();
    int rc = ss_plan_parse_hosts(p, text, "hosts", err, sizeof err);
    if (rc != 0)
        fail_msg("hosts: %s", err);
    return p;
}

/* Parsing text must fail with SS_E_CONFIG and err equal to want. */
static void s_expect_bad(const char *text, const char *want)
{
    char err[512] = "";
    ss_plan_t *p = ss_plan_new();
    int rc = ss_plan_parse_hosts(p, text, "hosts", err, sizeof err);
    assert_int_equal(rc, SS_E_CONFIG);
    assert_string_equal(err, want);
    ss_plan_destroy(&p);
    assert_null(p);
}

static void test_hosts_file(void **state)
{
    (void)state;
    ss_plan_t *p = s_hosts("# the rack\n"
                           "10.0.0.1 ps   # embedding and sync\n"
                           "\n"
                           "  alice@10.0.0.2\ttrainer embedding\n"
                           "fe80::1 trainer\n"
                           "node4 sync addr=[2001:db8::4]\n"
                           "node5 all addr=192.0.2.5");
    assert_int_equal(ss_plan_n_hosts(p), 5);
    const struct ss_plan_host *h = ss_plan_host(p, 0);
    assert_string_equal(h->target, "10.0.0.1");
    assert_string_equal(h->addr, "10.0.0.1");
    assert_int_equal(h->roles, EMB | SYN);
    assert_int_equal(h->line, 2);
    assert_int_equal(h->ipv6, 0);
    h = ss_plan_host(p, 1);
    assert_string_equal(h->target, "alice@10.0.0.2");  /* the address drops the user */
    assert_string_equal(h->addr, "10.0.0.2");
    assert_int_equal(h->roles, TRN | EMB);
    assert_int_equal(h->line, 4);
    h = ss_plan_host(p, 2);
    assert_string_equal(h->addr, "fe80::1");
    assert_int_equal(h->ipv6, 1);
    assert_int_equal(h->roles, TRN);
    h = ss_plan_host(p, 3);
    assert_string_equal(h->target, "node4");
    assert_string_equal(h->addr, "2001:db8::4");  /* brackets dropped */
    assert_int_equal(h->ipv6, 1);
    assert_int_equal(h->roles, SYN);
    h = ss_plan_host(p, 4);
    assert_string_equal(h->addr, "192.0.2.5");
    assert_int_equal(h->roles, EMB | SYN | TRN);
    assert_int_equal(h->line, 7);  /* no newline at the end */
    ss_plan_destroy(&p);

    /* a name resolves here (IPv4 first); no role: every role */
    p = s_hosts("localhost\n");
    h = ss_plan_host(p, 0);
    assert_true(!strcmp(h->addr, "127.0.0.1") || !strcmp(h->addr, "::1"));
    assert_int_equal(h->roles, EMB | SYN | TRN);
    ss_plan_destroy(&p);
}

static void test_hosts_errors(void **state)
{
    (void)state;
    s_expect_bad("10.0.0.1 ps\n10.0.0.2 trainer gpu\n",
                 "hosts:2: unknown role 'gpu' (want embedding, sync, trainer, ps, all or "
                 "addr=IP)");
    s_expect_bad("# only a comment\n10.0.0.1\n\n10.0.0.2\n10.0.0.1 trainer\n",
                 "hosts:5: host 10.0.0.1 listed twice (list its roles on one line)");
    s_expect_bad("10.0.0.1\nnode2 addr=10.0.0\n",
                 "hosts:2: addr=10.0.0 is not an IPv4 or IPv6 address (a PS binds it)");
    s_expect_bad("node1 addr=[::1\n",
                 "hosts:1: addr=[::1 is not an IPv4 or IPv6 address (a PS binds it)");
    s_expect_bad("  # nothing\n\n", "hosts lists no host");
    s_expect_bad("", "hosts lists no host");

    char err[512] = "";
    ss_plan_t *p = ss_plan_new();
    assert_int_equal(ss_plan_parse_hosts(p, "10.0.0.1\nme@" NO_SUCH_HOST " trainer\n", "hosts",
                                         err, sizeof err), SS_E_CONFIG);
    assert_non_null(strstr(err, "hosts:2: cannot resolve '" NO_SUCH_HOST "' ("));
    assert_non_null(strstr(err, "); write its address as addr=IP"));
    ss_plan_destroy(&p);

    p = ss_plan_new();
    assert_int_equal(ss_plan_load_hosts(p, "/nonexistent/hosts", err, sizeof err), SS_E_IO);
    assert_non_null(strstr(err, "cannot read hosts file /nonexistent/hosts: "));
    ss_plan_destroy(&p);
}

/* A file's errors name its path and line. */
static void test_hosts_load(void **state)
{
    (void)state;
    char dir[256], path[300], err[512] = "";
    assert_int_equal(t_tmpdir(dir, sizeof dir, "plan"), 0);
    snprintf(path, sizeof path, "%s/hosts", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("127.0.0.1 ps\n127.0.0.2 trainer\n127.0.0.3 tpu\n", f);
    fclose(f);
    ss_plan_t *p = ss_plan_new();
    assert_int_equal(ss_plan_load_hosts(p, path, err, sizeof err), SS_E_CONFIG);
    char want[512];
    snprintf(want, sizeof want, "%s:3: unknown role 'tpu' (want embedding, sync, trainer, ps, "
             "all or addr=IP)", path);
    assert_string_equal(err, want);
    ss_plan_destroy(&p);
    t_rmtree(dir);
}

/* The role-host-endpoint triple of process k of kind. */
static void s_expect(const ss_plan_t *p, int kind, size_t k, size_t host, const char *ep)
{
    assert_int_equal(ss_plan_host_of(p, kind, k), host);
    if (ep)
        assert_string_equal(ss_plan_endpoint(p, kind, k), ep);
    else
        assert_null(ss_plan_endpoint(p, kind, k));
}

static void test_place_round_robin(void **state)
{
    (void)state;
    char err[512] = "";
    ss_plan_t *p = s_hosts("127.0.0.1 ps\n127.0.0.2 embedding\n127.0.0.3 trainer\n");
    struct ss_plan_opts o = {.n = {3, 1, 2}, .needs_sync_ps = 1, .ps_threads = 1, .admin = 1};
    assert_int_equal(ss_plan_place(p, &o, "hosts", err, sizeof err), 0);
    /* embedding round-robin over hosts 0 and 1; sync on 0; trainers on 2 */
    assert_int_equal(ss_plan_count(p, SS_CLUSTER_EMBEDDING), 3);
    s_expect(p, SS_CLUSTER_EMBEDDING, 0, 0, NULL);
    s_expect(p, SS_CLUSTER_EMBEDDING, 1, 1, NULL);
    s_expect(p, SS_CLUSTER_EMBEDDING, 2, 0, NULL);
    s_expect(p, SS_CLUSTER_SYNC, 0, 0, NULL);
    s_expect(p, SS_CLUSTER_TRAINER, 1, 2, NULL);
    s_expect(p, SS_PLAN_ADMIN, 1, 2, NULL);
    /* free ports each host must find: one per endpoint, admin included */
    assert_int_equal(ss_plan_host(p, 0)->n_ports, 3);
    assert_int_equal(ss_plan_host(p, 1)->n_ports, 1);
    assert_int_equal(ss_plan_host(p, 2)->n_ports, 4);

    /* endpoints unset until the ports are known, then in kind order */
    assert_int_equal(ss_plan_endpoints(p, err, sizeof err), 0);
    s_expect(p, SS_CLUSTER_TRAINER, 0, 2, NULL);
    const unsigned p0[] = {7000, 7100, 7200}, p1[] = {8000}, p2[] = {9000, 9001, 9002, 9003};
    assert_int_equal(ss_plan_set_ports(p, 0, p0, 3), 0);
    assert_int_equal(ss_plan_set_ports(p, 1, p1, 1), 0);
    assert_int_equal(ss_plan_set_ports(p, 2, p2, 3), 0);  /* one short */
    assert_int_equal(ss_plan_set_ports(p, 3, p2, 1), SS_E_RANGE);
    assert_int_equal(ss_plan_endpoints(p, err, sizeof err), 0);
    s_expect(p, SS_CLUSTER_EMBEDDING, 0, 0, "tcp://127.0.0.1:7000");
    s_expect(p, SS_CLUSTER_EMBEDDING, 1, 1, "tcp://127.0.0.2:8000");
    s_expect(p, SS_CLUSTER_EMBEDDING, 2, 0, "tcp://127.0.0.1:7100");
    s_expect(p, SS_CLUSTER_SYNC, 0, 0, "tcp://127.0.0.1:7200");
    s_expect(p, SS_CLUSTER_TRAINER, 0, 2, "tcp://127.0.0.3:9000");
    s_expect(p, SS_CLUSTER_TRAINER, 1, 2, "tcp://127.0.0.3:9001");
    s_expect(p, SS_PLAN_ADMIN, 0, 2, "tcp://127.0.0.3:9002");
    s_expect(p, SS_PLAN_ADMIN, 1, 2, NULL);  /* its port was not given */
    ss_plan_destroy(&p);
}

static void test_place_missing_role(void **state)
{
    (void)state;
    char err[512] = "";
    ss_plan_t *p = s_hosts("127.0.0.1 embedding\n");
    struct ss_plan_opts o = {.n = {1, 1, 1}, .needs_sync_ps = 0, .ps_threads = 1};
    assert_int_equal(ss_plan_place(p, &o, "hosts", err, sizeof err), SS_E_CONFIG);
    assert_string_equal(err, "no host in hosts takes the trainer role");
    ss_plan_destroy(&p);

    /* sync PSs that no rule uses may sit anywhere; EASGD's need a host */
    p = s_hosts("127.0.0.1 embedding\n127.0.0.2 trainer\n");
    assert_int_equal(ss_plan_place(p, &o, "hosts", err, sizeof err), 0);
    s_expect(p, SS_CLUSTER_SYNC, 0, 0, NULL);
    o.needs_sync_ps = 1;
    assert_int_equal(ss_plan_place(p, &o, "hosts", err, sizeof err), SS_E_CONFIG);
    assert_string_equal(err, "no host in hosts takes the sync role");
    ss_plan_destroy(&p);
}

static void test_endpoints_ipc_and_base(void **state)
{
    (void)state;
    char err[512] = "";
    ss_plan_t *p = ss_plan_new();
    ss_plan_local_host(p);
    struct ss_plan_opts o = {.n = {2, 1, 2}, .needs_sync_ps = 1, .ps_threads = 4, .admin = 1,
                             .ipc_dir = "/run/job/ipc"};
    assert_int_equal(ss_plan_place(p, &o, "this machine", err, sizeof err), 0);
    assert_int_equal(ss_plan_host(p, 0)->n_ports, 2);  /* the admin endpoints only */
    const unsigned ports[] = {4100, 4200};
    ss_plan_set_ports(p, 0, ports, 2);
    assert_int_equal(ss_plan_endpoints(p, err, sizeof err), 0);
    s_expect(p, SS_CLUSTER_EMBEDDING, 1, 0, "ipc:///run/job/ipc/e1");
    s_expect(p, SS_CLUSTER_SYNC, 0, 0, "ipc:///run/job/ipc/s0");
    s_expect(p, SS_CLUSTER_TRAINER, 1, 0, "ipc:///run/job/ipc/t1");
    s_expect(p, SS_PLAN_ADMIN, 0, 0, "tcp://127.0.0.1:4100");
    s_expect(p, SS_PLAN_ADMIN, 1, 0, "tcp://127.0.0.1:4200");
    ss_plan_destroy(&p);

    /* base port: a PS takes ps.threads ports in a row, IPv6 in brackets */
    p = s_hosts("::1 ps\n127.0.0.3 trainer\n");
    o = (struct ss_plan_opts){.n = {2, 1, 2}, .needs_sync_ps = 1, .ps_threads = 4, .admin = 1,
                              .base_port = 20000};
    assert_int_equal(ss_plan_place(p, &o, "hosts", err, sizeof err), 0);
    assert_int_equal(ss_plan_host(p, 0)->n_ports, 0);
    assert_int_equal(ss_plan_endpoints(p, err, sizeof err), 0);
    s_expect(p, SS_CLUSTER_EMBEDDING, 0, 0, "tcp://[::1]:20000");
    s_expect(p, SS_CLUSTER_EMBEDDING, 1, 0, "tcp://[::1]:20004");
    s_expect(p, SS_CLUSTER_SYNC, 0, 0, "tcp://[::1]:20008");
    s_expect(p, SS_CLUSTER_TRAINER, 0, 1, "tcp://127.0.0.3:20000");
    s_expect(p, SS_CLUSTER_TRAINER, 1, 1, "tcp://127.0.0.3:20001");
    s_expect(p, SS_PLAN_ADMIN, 0, 1, "tcp://127.0.0.3:20002");
    s_expect(p, SS_PLAN_ADMIN, 1, 1, "tcp://127.0.0.3:20003");
    /* a base port that runs past 65535 */
    o.base_port = 65530;
    assert_int_equal(ss_plan_place(p, &o, "hosts", err, sizeof err), 0);
    assert_int_equal(ss_plan_endpoints(p, err, sizeof err), SS_E_RANGE);
    assert_string_equal(err, "base port 65530: embedding 1 on ::1 would take port 65537, "
                        "past 65535");
    ss_plan_destroy(&p);
}

/* The endpoints a plan hands out are ones ss_cluster reads back (IPv6). */
static void test_endpoints_ipv6_free_ports(void **state)
{
    (void)state;
    char err[512] = "", host[64];
    unsigned port = 0;
    ss_plan_t *p = s_hosts("user@[2001:db8::7] all\n");
    struct ss_plan_opts o = {.n = {1, 0, 1}, .ps_threads = 2, .admin = 1};
    assert_int_equal(ss_plan_place(p, &o, "hosts", err, sizeof err), 0);
    assert_int_equal(ss_plan_host(p, 0)->n_ports, 3);
    const unsigned ports[] = {5000, 5010, 5020};
    ss_plan_set_ports(p, 0, ports, 3);
    assert_int_equal(ss_plan_endpoints(p, err, sizeof err), 0);
    s_expect(p, SS_CLUSTER_EMBEDDING, 0, 0, "tcp://[2001:db8::7]:5000");
    s_expect(p, SS_PLAN_ADMIN, 0, 0, "tcp://[2001:db8::7]:5020");
    assert_int_equal(ss_endpoint_split(ss_plan_endpoint(p, SS_CLUSTER_TRAINER, 0), host,
                                       sizeof host, &port, err, sizeof err), 0);
    assert_string_equal(host, "2001:db8::7");
    assert_int_equal(port, 5010);
    assert_int_equal(ss_endpoint_is_ipv6(ss_plan_endpoint(p, SS_CLUSTER_TRAINER, 0)), 1);
    ss_plan_destroy(&p);
}

static void test_place_fixed(void **state)
{
    (void)state;
    char err[512] = "";
    ss_plan_t *p = s_hosts("10.0.0.1 ps\nnode2 addr=fd00::2\n");
    const char *emb[] = {"tcp://10.0.0.1:7000", "tcp://[fd00::2]:7000"};
    const char *syn[] = {"tcp://10.0.0.1:7001"};
    const char *trn[] = {"tcp://[fd00::2]:7100"};
    const char *const *eps[] = {emb, syn, trn};
    const size_t n[] = {2, 1, 1};
    assert_int_equal(ss_plan_place_fixed(p, eps, n, 1, "hosts", err, sizeof err), 0);
    s_expect(p, SS_CLUSTER_EMBEDDING, 0, 0, "tcp://10.0.0.1:7000");
    s_expect(p, SS_CLUSTER_EMBEDDING, 1, 1, "tcp://[fd00::2]:7000");
    s_expect(p, SS_CLUSTER_TRAINER, 0, 1, "tcp://[fd00::2]:7100");
    assert_int_equal(ss_plan_count(p, SS_PLAN_ADMIN), 0);
    assert_int_equal(ss_plan_endpoints(p, err, sizeof err), 0);  /* they stay */
    s_expect(p, SS_CLUSTER_SYNC, 0, 0, "tcp://10.0.0.1:7001");

    const char *other[] = {"tcp://10.0.0.9:7100"};
    eps[2] = other;
    assert_int_equal(ss_plan_place_fixed(p, eps, n, 1, "hosts", err, sizeof err), SS_E_CONFIG);
    assert_string_equal(err, "--fixed-ports: endpoint tcp://10.0.0.9:7100 names no host of "
                        "hosts (by addr)");
    /* without a hosts file: everything on the one host */
    assert_int_equal(ss_plan_place_fixed(p, eps, n, 0, "hosts", err, sizeof err), 0);
    s_expect(p, SS_CLUSTER_TRAINER, 0, 0, "tcp://10.0.0.9:7100");
    ss_plan_destroy(&p);
}

static void test_endpoint_split(void **state)
{
    (void)state;
    char host[64], err[256];
    unsigned port = 0;
    assert_int_equal(ss_endpoint_split("tcp://10.1.2.3:65535", host, sizeof host, &port, err,
                                       sizeof err), 0);
    assert_string_equal(host, "10.1.2.3");
    assert_int_equal(port, 65535);
    assert_int_equal(ss_endpoint_split("tcp://[::1]:80", host, sizeof host, &port, err,
                                       sizeof err), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 80);
    assert_int_equal(ss_endpoint_split("ipc:///x/e0", host, sizeof host, &port, err,
                                       sizeof err), SS_E_CONFIG);
    assert_string_equal(err, "not a tcp:// endpoint");
    assert_int_equal(ss_endpoint_split("tcp://[::1:80", host, sizeof host, &port, err,
                                       sizeof err), SS_E_CONFIG);
    assert_string_equal(err, "an IPv6 address is written tcp://[ADDR]:PORT");
    assert_int_equal(ss_endpoint_split("tcp://h:0", host, sizeof host, &port, err, sizeof err),
                     SS_E_CONFIG);
    assert_int_equal(ss_endpoint_split("tcp://a-long-host-name:1", host, 8, &port, err,
                                       sizeof err), SS_E_CONFIG);
    assert_string_equal(err, "host name too long");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hosts_file),
        cmocka_unit_test(test_hosts_errors),
        cmocka_unit_test(test_hosts_load),
        cmocka_unit_test(test_place_round_robin),
        cmocka_unit_test(test_place_missing_role),
        cmocka_unit_test(test_endpoints_ipc_and_base),
        cmocka_unit_test(test_endpoints_ipv6_free_ports),
        cmocka_unit_test(test_place_fixed),
        cmocka_unit_test(test_endpoint_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
