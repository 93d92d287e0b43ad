/* ss_json.h - reading JSON through libjansson, with errors that say where.
 *
 * The project's JSON files and replies (result-trainer-R.json, result.json,
 * the launcher's JSON-lines files, metrics rows, STATS replies) are read here
 * and nowhere by hand: a parse names what it read (a file name, "STATS
 * reply"), the line and column and what is wrong there; a field lookup names
 * what, the field and the type it found. Writing stays with the writers that
 * escape already (ss_jw in ss_stats.h); ss_json_text() gives a parsed value
 * back as the text those writers would give it, so a reader that copies a
 * field keeps the file's bytes.
 *
 * Every call is thread-safe on distinct values (jansson's reference counts
 * are atomic; a value is not shared across threads here). Values are
 * jansson's json_t: the caller owns what a parse returns and frees it with
 * json_decref(); what a lookup returns is borrowed from the object. */
#ifndef SS_JSON_H
#define SS_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Largest JSON file ss_json_load() reads (result and metrics files are a few
 * kilobytes; this bounds what a wrong path can make it allocate). */
#define SS_JSON_MAX_FILE_BYTES (64u << 20)

/* Parse text as one JSON object (duplicate keys refused). what names the
 * text in errors ("result-trainer-0.json", "STATS reply"). On success *out
 * is the object (caller owns: json_decref()) and 0 is returned; otherwise
 * *out is NULL, err says "WHAT: line L, column C: why" (or "WHAT: not a JSON
 * object (an array)") and the return is SS_E_CORRUPT. Borrows text and what. */
int ss_json_parse(const char *text, const char *what, json_t **out, char *err, size_t len);

/* Read the file at path and parse it as ss_json_parse() does, naming path.
 * When text_p is not NULL, *text_p gets the file's bytes, NUL-terminated
 * (caller owns: ss_free()), on success only. Returns 0; SS_E_NOTFOUND when
 * the file does not exist; SS_E_IO when it cannot be read (or passes
 * SS_JSON_MAX_FILE_BYTES); SS_E_CORRUPT when it is not a JSON object. err
 * names path and the cause in every case. */
int ss_json_load(const char *path, json_t **out, char **text_p, char *err, size_t len);

/* Field key of obj as a number (an integer or a real). Returns 0 with *v
 * set; SS_E_NOTFOUND when the field is absent or null; SS_E_INVAL when it is
 * of another type. err says "WHAT: field KEY is missing" or "... is a
 * string, not a number". Borrows everything. */
int ss_json_num(const json_t *obj, const char *key, double *v, const char *what, char *err,
                size_t len);

/* Field key of obj as a count: an integer >= 0. Returns as ss_json_num(),
 * plus SS_E_RANGE for a negative integer. */
int ss_json_u64(const json_t *obj, const char *key, uint64_t *v, const char *what, char *err,
                size_t len);

/* Field key of obj as a string: *v borrows it (valid while obj lives).
 * Returns as ss_json_num() ("is a number, not a string"). */
int ss_json_str(const json_t *obj, const char *key, const char **v, const char *what, char *err,
                size_t len);

/* v (NULL: "null") as compact JSON text into out, written as the project's
 * writers write it: integers in full, reals as ss_json_number() gives them
 * (so a field read from a file and written again keeps its bytes), keys in
 * the object's order. Returns 0, or SS_E_FULL when it does not fit (out then
 * holds "null"). Borrows v. */
int ss_json_text(const json_t *v, char *out, size_t len);

/* The name of v's JSON type for messages ("an object", "a string", ...). */
const char *ss_json_type_name(const json_t *v);

#endif
