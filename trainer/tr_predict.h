/* tr_predict.h - the output file of batch prediction (shadow-trainer --predict).
 *
 * The scorer's workers each read one byte range of the input, in order
 * (tr_reader.h), so the file is written in parts: worker k writes the
 * predictions of its range, in its order, to part k; at the end the parts are
 * joined in worker order, which is input order. Part 0 is the temporary file
 * PATH.tmp-PID itself and the others (PATH.tmp-PID.K) are appended to it;
 * the result is fsynced and renamed to PATH in one step. Until then PATH is
 * untouched; on any failure (a full disk included) every temporary file is
 * removed and PATH is left as it was (absent, or its old contents).
 *
 * One line per input line of the data (headers apart), in input order:
 *   a good line: its click probability, printf "%.9g" of the model's float
 *                (reads back as the same float);
 *   a bad line:  "nan" with keep_bad (the default: line i of the output
 *                belongs to data line i, so the predictions can be pasted
 *                next to the input), nothing without it (the output then has
 *                one line per example).
 *
 * Stream mode (tr_pred_out_new_stream: shadow-trainer --predict -): the
 * same parts, as temporary files in a folder (job.run_dir) that are unlinked
 * the moment they are open; the main thread copies them to a descriptor
 * (standard output) in order while the workers write: part k as it grows,
 * in whole lines, once parts 0..k-1 are whole (tr_pred_out_pump). The text
 * is the same bytes as the file's. A stream cannot be taken back: after a
 * failure the reader has a prefix of the output (whole lines), and only the
 * exit status tells.
 *
 * Thread: the output object belongs to the main thread; each part's FILE is
 * written by one worker thread only, between tr_pred_out_new() and
 * tr_pred_out_commit() (stream mode: tr_pred_out_part_done()). */
#ifndef TR_PREDICT_H
#define TR_PREDICT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tr_pred_out tr_pred_out_t;

/* Create the n_parts (>= 1) temporary part files of output path (next to it,
 * so that the rename is atomic). Returns NULL with err naming the file and
 * why (a missing folder, no permission). Caller owns the object. */
tr_pred_out_t *tr_pred_out_new(const char *path, uint32_t n_parts, char *err, size_t err_len);

/* Stream mode: n_parts (>= 1) parts as nameless temporary files made in
 * tmp_dir, to be copied in order to out_fd (borrowed: the caller closes it).
 * A write to out_fd that a signal interrupts is retried unless *stop is set
 * (stop may be NULL). Returns NULL with err naming the file and why. Caller
 * owns the object. */
tr_pred_out_t *tr_pred_out_new_stream(int out_fd, const char *tmp_dir, uint32_t n_parts,
                                      const volatile sig_atomic_t *stop, char *err,
                                      size_t err_len);

/* Stream mode: part k's writer has stopped for good (its worker left its
 * loop): close its stream (the last flush), so that the copy can go past
 * it. Idempotent. Returns 0, or SS_E_NOSPC / SS_E_IO with err. Main thread. */
int tr_pred_out_part_done(tr_pred_out_t *self, uint32_t k, char *err, size_t err_len);

/* Stream mode: copy to out_fd what the parts hold beyond what was copied,
 * in order (at most a few MiB a call), *copied set to the bytes copied;
 * blocks while out_fd's reader is slow. Returns 0; SS_E_STOPPED when a
 * signal interrupted a write and *stop was set; or an error with err
 * ("standard output was closed by its reader ..." on EPIPE:
 * tr_pred_out_reader_gone() then says 1). Main thread. */
int tr_pred_out_pump(tr_pred_out_t *self, size_t *copied, char *err, size_t err_len);

/* Stream mode: the lines written to out_fd so far. */
uint64_t tr_pred_out_lines(const tr_pred_out_t *self);

/* Stream mode: 1 when out_fd's reader closed it (a write failed with EPIPE). */
int tr_pred_out_reader_gone(const tr_pred_out_t *self);

/* Remove every temporary file not yet committed and free. Accepts NULL. */
void tr_pred_out_destroy(tr_pred_out_t **self_p);

/* Remove the temporary files now, while the workers may still write to
 * their (then nameless) streams: a run told to stop leaves nothing behind
 * even if it is killed before its workers return. No commit after it. Main
 * thread. */
void tr_pred_out_discard(tr_pred_out_t *self);

/* Part k's stream, for one worker thread to write with tr_pred_write*. */
FILE *tr_pred_out_part(tr_pred_out_t *self, uint32_t k);

/* Write n predictions, each after gaps[i] "nan" lines when keep_bad (gaps
 * NULL: none). Returns 0, or -1 with errno set when the stream failed. */
int tr_pred_write(FILE *f, const float *probs, const uint32_t *gaps, uint32_t n, int keep_bad);

/* Write count "nan" lines (bad lines after a part's last example). Returns
 * 0 or -1 with errno set. */
int tr_pred_write_nan(FILE *f, uint64_t count);

/* Close the parts, join them in order, fsync and rename onto path. Returns 0,
 * or SS_E_NOSPC / SS_E_IO with err naming the file and the cause ("no space
 * left on device"), every temporary file removed and path untouched. Stream
 * mode: close the parts and copy the rest to out_fd (errors as
 * tr_pred_out_pump's). Main thread, after every writer stopped. */
int tr_pred_out_commit(tr_pred_out_t *self, char *err, size_t err_len);

#endif
