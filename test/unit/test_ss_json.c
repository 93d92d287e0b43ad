/* test_ss_json.c - JSON read through jansson: fields by type with errors that
 * name what, the field and the type found; malformed text (cut short, bad
 * tokens, duplicate keys, not an object, nested past jansson's depth limit,
 * bytes that are not UTF-8) refused with the line, column and why, never a
 * crash; files missing, unreadable or bad named in the error; and values
 * written back byte for byte as the project's writer (ss_jw) wrote them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ss_err.h"
#include "ss_json.h"
#include "ss_mem.h"
#include "ss_stats.h"

static int setup(void **state)
{
    return t_fix_setup(state, "json", "result.json");
}

static int teardown(void **state)
{
    return t_fix_teardown(state);
}

static void s_write(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
    assert_int_equal(fclose(fp), 0);
}

/* err contains needle (both printed when not). */
static void s_has(const char *err, const char *needle)
{
    if (!strstr(err, needle))
        fail_msg("error '%s' lacks '%s'", err, needle);
}

static void test_fields(void **state)
{
    (void)state;
    json_t *o;
    char err[256];
    double d;
    uint64_t u;
    const char *s;
    assert_int_equal(ss_json_parse("{\"examples\":18446744073,\"eps\":1234.5,\"eval_ne\":0.8125,"
                                   "\"output_model\":\"center\",\"n\":-3,\"z\":null}",
                                   "result", &o, err, sizeof err), 0);
    assert_int_equal(ss_json_u64(o, "examples", &u, "result", err, sizeof err), 0);
    assert_true(u == 18446744073ull);
    assert_int_equal(ss_json_num(o, "eps", &d, "result", err, sizeof err), 0);
    assert_true(d == 1234.5);
    assert_int_equal(ss_json_num(o, "examples", &d, "result", err, sizeof err), 0);
    assert_true(d == 18446744073.0);  /* an integer is a number too */
    assert_int_equal(ss_json_str(o, "output_model", &s, "result", err, sizeof err), 0);
    assert_string_equal(s, "center");

    assert_int_equal(ss_json_num(o, "wall_s", &d, "result", err, sizeof err), SS_E_NOTFOUND);
    assert_string_equal(err, "result: field wall_s is missing");
    assert_int_equal(ss_json_num(o, "z", &d, "result", err, sizeof err), SS_E_NOTFOUND);
    assert_string_equal(err, "result: field z is null");
    assert_int_equal(ss_json_num(o, "output_model", &d, "result", err, sizeof err), SS_E_INVAL);
    assert_string_equal(err, "result: field output_model is a string, not a number");
    assert_int_equal(ss_json_u64(o, "eps", &u, "result", err, sizeof err), SS_E_INVAL);
    assert_string_equal(err, "result: field eps is a real number, not an integer");
    assert_int_equal(ss_json_u64(o, "n", &u, "result", err, sizeof err), SS_E_RANGE);
    assert_string_equal(err, "result: field n is -3, not a count");
    assert_int_equal(ss_json_str(o, "eps", &s, "result", err, sizeof err), SS_E_INVAL);
    assert_string_equal(err, "result: field eps is a real number, not a string");
    json_decref(o);
}

/* Every malformed text is refused with SS_E_CORRUPT, no object, and an
 * error naming what was read, where and why. */
static void test_malformed(void **state)
{
    (void)state;
    static char deep[8192];
    for (size_t i = 0; i < 4000; i++)
        deep[i] = '[';
    static const struct {
        const char *text;
        const char *needle;
    } cases[] = {
        {"", "line 1, column 0"},
        {"{\"examples\":12", "line 1, column 14"},
        {"{\"examples\":12,}", "line 1, column 16"},
        {"{\"a\":1}\n{\"a\":2}", "line 2, column 1"},
        {"{\"a\":1,\"a\":2}", "duplicate object key"},
        {"{\"a\":NaN}", "invalid token near 'NaN'"},
        {"{\"a\":\"\xff\"}", "unable to decode byte 0xff"},
        {"{\"a\":\"x\ny\"}", "unexpected newline"},
        {"[1,2]", "not a JSON object (an array)"},
        {"\"text\"", "'[' or '{' expected"},
        {"{\"a\":99999999999999999999}", "too big integer"},
        {deep, "maximum parsing depth"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *o = (json_t *)&o;
        char err[256] = "";
        int rc = ss_json_parse(cases[i].text, "reply-7", &o, err, sizeof err);
        if (rc != SS_E_CORRUPT || o || !strstr(err, "reply-7: ") || !strstr(err, cases[i].needle)) {
            print_message("case %zu: rc %d, object %p, error '%s' (want '%s')\n", i, rc,
                          (void *)o, err, cases[i].needle);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* What ss_jw writes comes back from ss_json_text() byte for byte. */
static void test_text_keeps_bytes(void **state)
{
    (void)state;
    struct ss_jw w;
    json_t *o;
    char err[256], text[1024];
    ss_jw_begin(&w, 4096);
    ss_jw_u64(&w, "examples", 1234567890123ull);
    ss_jw_i64(&w, "delta", -42);
    ss_jw_num(&w, "eps", 1.0 / 3.0);
    ss_jw_num(&w, "tenth", 0.1);
    ss_jw_num(&w, "tiny", 1e-7);
    ss_jw_num(&w, "whole", 2.0);
    ss_jw_num(&w, "big", 1.5e300);
    ss_jw_num(&w, "nan", NAN);
    ss_jw_str(&w, "selected_on", "data \"valid\" \\ split");
    ss_jw_str(&w, "utf8", "caf\xc3\xa9");
    ss_jw_bool(&w, "stopped_early", 0);
    ss_jw_bool(&w, "model_saved", 1);
    ss_jw_raw(&w, "list", "[1,0.25,{\"rank\":2,\"exit\":137},[],{}]");
    ss_jw_end(&w);
    assert_int_equal(ss_json_parse(w.buf, "jw", &o, err, sizeof err), 0);
    assert_int_equal(ss_json_text(o, text, sizeof text), 0);
    assert_string_equal(text, w.buf);
    assert_int_equal(ss_json_text(json_object_get(o, "eps"), text, sizeof text), 0);
    assert_string_equal(text, "0.33333333333333331");
    assert_int_equal(ss_json_text(json_object_get(o, "selected_on"), text, sizeof text), 0);
    assert_string_equal(text, "\"data \\\"valid\\\" \\\\ split\"");
    assert_int_equal(ss_json_text(NULL, text, sizeof text), 0);
    assert_string_equal(text, "null");
    /* too small: SS_E_FULL and "null", never a cut value */
    assert_int_equal(ss_json_text(o, text, 40), SS_E_FULL);
    assert_string_equal(text, "null");
    assert_int_equal(ss_json_text(json_object_get(o, "selected_on"), text, 10), SS_E_FULL);
    assert_string_equal(text, "null");
    json_decref(o);
    ss_jw_fini(&w);
}

static void test_load(void **state)
{
    struct t_fix *f = *state;
    json_t *o;
    char err[512], *text = NULL;
    uint64_t u;
    s_write(f->path, "{\"examples\":96,\n \"eps\":12.5}\n");
    assert_int_equal(ss_json_load(f->path, &o, &text, err, sizeof err), 0);
    assert_string_equal(text, "{\"examples\":96,\n \"eps\":12.5}\n");
    assert_int_equal(ss_json_u64(o, "examples", &u, f->path, err, sizeof err), 0);
    assert_int_equal(u, 96);
    json_decref(o);
    ss_free(text);

    s_write(f->path, "{\"examples\":96,\n \"eps\":}\n");  /* cut by a full disk, say */
    text = NULL;
    assert_int_equal(ss_json_load(f->path, &o, &text, err, sizeof err), SS_E_CORRUPT);
    assert_null(o);
    assert_null(text);
    s_has(err, f->path);
    s_has(err, "line 2, column 8");

    assert_int_equal(ss_json_load(f->dir, &o, NULL, err, sizeof err), SS_E_IO);
    s_has(err, f->dir);
    s_has(err, "not a regular file");
    assert_int_equal(ss_json_load(f->tmp, &o, NULL, err, sizeof err), SS_E_NOTFOUND);
    s_has(err, f->tmp);
    s_has(err, "No such file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_text_keeps_bytes),
        cmocka_unit_test_setup_teardown(test_load, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
