/* ss_json.c - reading JSON through libjansson (see ss_json.h).
 *
 * DESIGN: jansson parses and holds the values; this file adds what every
 * reader here needs on top and would otherwise write again: errors that
 * name the file or reply, the field and the type found, and values written
 * back as the project's writers write them (ss_json_number() for reals),
 * which jansson's own dump does not do (it prints 17 digits and "2.0"). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ss_err.h"
#include "ss_json.h"
#include "ss_mem.h"
#include "ss_stats.h"

int ss_json_parse(const char *text, const char *what, json_t **out, char *err, size_t len)
{
    json_error_t je;
    *out = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!*out) {
        snprintf(err, len, "%s: line %d, column %d: %s", what, je.line, je.column, je.text);
        return SS_E_CORRUPT;
    }
    if (!json_is_object(*out)) {
        snprintf(err, len, "%s: not a JSON object (%s)", what, ss_json_type_name(*out));
        json_decref(*out);
        *out = NULL;
        return SS_E_CORRUPT;
    }
    return 0;
}

/* The whole file at path, NUL-terminated, into *buf_p (caller frees). */
static int s_read_file(const char *path, char **buf_p, char *err, size_t len)
{
    struct stat st;
    FILE *f = fopen(path, "rb");
    *buf_p = NULL;
    if (!f) {
        int e = errno;
        snprintf(err, len, "cannot open %s: %s", path, strerror(e));
        return e == ENOENT ? SS_E_NOTFOUND : SS_E_IO;
    }
    const char *why = fstat(fileno(f), &st) != 0 ? strerror(errno)
                      : !S_ISREG(st.st_mode)     ? "not a regular file"
                      : (uint64_t)st.st_size > SS_JSON_MAX_FILE_BYTES ? "larger than 64 MiB"
                                                                      : NULL;
    if (why) {
        snprintf(err, len, "cannot read %s: %s", path, why);
        fclose(f);
        return SS_E_IO;
    }
    char *buf = ss_malloc((size_t)st.st_size + 1);
    size_t n = fread(buf, 1, (size_t)st.st_size, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, len, "cannot read %s: input/output error", path);
        ss_free(buf);
        return SS_E_IO;
    }
    buf[n] = '\0';
    *buf_p = buf;
    return 0;
}

int ss_json_load(const char *path, json_t **out, char **text_p, char *err, size_t len)
{
    char *buf;
    *out = NULL;
    int rc = s_read_file(path, &buf, err, len);
    if (rc == 0)
        rc = ss_json_parse(buf, path, out, err, len);
    if (rc == 0 && text_p)
        *text_p = buf;
    else
        ss_free(buf);
    return rc;
}

const char *ss_json_type_name(const json_t *v)
{
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Field key of obj, or NULL with err saying it is missing or null. */
static const json_t *s_field(const json_t *obj, const char *key, const char *what, char *err,
                             size_t len)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        snprintf(err, len, "%s: field %s is %s", what, key, v ? "null" : "missing");
        return NULL;
    }
    return v;
}

static int s_wrong_type(const json_t *v, const char *key, const char *want, const char *what,
                        char *err, size_t len)
{
    snprintf(err, len, "%s: field %s is %s, not %s", what, key, ss_json_type_name(v), want);
    return SS_E_INVAL;
}

int ss_json_num(const json_t *obj, const char *key, double *v, const char *what, char *err,
                size_t len)
{
    const json_t *f = s_field(obj, key, what, err, len);
    if (!f)
        return SS_E_NOTFOUND;
    if (!json_is_number(f))
        return s_wrong_type(f, key, "a number", what, err, len);
    *v = json_number_value(f);
    return 0;
}

int ss_json_u64(const json_t *obj, const char *key, uint64_t *v, const char *what, char *err,
                size_t len)
{
    const json_t *f = s_field(obj, key, what, err, len);
    if (!f)
        return SS_E_NOTFOUND;
    if (!json_is_integer(f))
        return s_wrong_type(f, key, "an integer", what, err, len);
    if (json_integer_value(f) < 0) {
        snprintf(err, len, "%s: field %s is %" JSON_INTEGER_FORMAT ", not a count", what, key,
                 json_integer_value(f));
        return SS_E_RANGE;
    }
    *v = (uint64_t)json_integer_value(f);
    return 0;
}

int ss_json_str(const json_t *obj, const char *key, const char **v, const char *what, char *err,
                size_t len)
{
    const json_t *f = s_field(obj, key, what, err, len);
    if (!f)
        return SS_E_NOTFOUND;
    if (!json_is_string(f))
        return s_wrong_type(f, key, "a string", what, err, len);
    *v = json_string_value(f);
    return 0;
}

/* ------------------------------------------------------------ text */

/* Where ss_json_text() writes: out[0..len), n bytes used, full once a piece
 * did not fit. */
struct s_cur {
    char *out;
    size_t len;
    size_t n;
    int full;
};

static void s_put(struct s_cur *c, const char *p, size_t k)
{
    if (c->full || c->n + k + 1 > c->len) {
        c->full = 1;
        return;
    }
    memcpy(c->out + c->n, p, k);
    c->n += k;
    c->out[c->n] = '\0';
}

/* A string value (or an object's key) quoted and escaped by jansson. */
static void s_put_string(struct s_cur *c, const char *s)
{
    json_t *str = json_string_nocheck(s);
    size_t k = str ? json_dumpb(str, c->out + c->n, c->full ? 0 : c->len - c->n,
                                JSON_ENCODE_ANY) : 0;
    json_decref(str);
    if (k == 0 || c->full || c->n + k + 1 > c->len) {
        c->full = 1;
        return;
    }
    c->n += k;
    c->out[c->n] = '\0';
}

static void s_put_value(struct s_cur *c, const json_t *v)
{
    char t[48];
    const char *key;
    const json_t *item;
    size_t i;
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_OBJECT:
        s_put(c, "{", 1);
        i = 0;
        json_object_foreach((json_t *)v, key, item) {
            if (i++)
                s_put(c, ",", 1);
            s_put_string(c, key);
            s_put(c, ":", 1);
            s_put_value(c, item);
        }
        s_put(c, "}", 1);
        return;
    case JSON_ARRAY:
        s_put(c, "[", 1);
        json_array_foreach(v, i, item) {
            if (i)
                s_put(c, ",", 1);
            s_put_value(c, item);
        }
        s_put(c, "]", 1);
        return;
    case JSON_STRING: s_put_string(c, json_string_value(v)); return;
    case JSON_INTEGER:
        snprintf(t, sizeof t, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL: ss_json_number(t, sizeof t, json_real_value(v)); break;
    case JSON_TRUE: snprintf(t, sizeof t, "true"); break;
    case JSON_FALSE: snprintf(t, sizeof t, "false"); break;
    default: snprintf(t, sizeof t, "null"); break;
    }
    s_put(c, t, strlen(t));
}

int ss_json_text(const json_t *v, char *out, size_t len)
{
    struct s_cur c = {.out = out, .len = len};
    if (len == 0)
        return SS_E_FULL;
    out[0] = '\0';
    s_put_value(&c, v);
    if (c.full) {
        snprintf(out, len, "null");
        return SS_E_FULL;
    }
    return 0;
}
