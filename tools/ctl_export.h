/* ctl_export.h - shadow-ctl export: a saved model set into one model file.
 *
 * Reads RUN_DIR/model (MANIFEST, dense.bin, every embedding-K.ckpt of the
 * save MANIFEST names; the sync-K.ckpt files are checked to be there, not
 * read: the dense model already is the output model) and the job's config
 * (-c JOB.yaml and --set, or the launch's RUN_DIR/cluster.args), checks the
 * set whole (every file present, of the same save, of the job's shape, its
 * checksum), and writes the model file of trainer/tr_mfile.h. Nothing is
 * written when a check fails: the message names the part. */
#ifndef CTL_EXPORT_H
#define CTL_EXPORT_H

/* shadow-ctl export MODEL_DIR -o FILE [-c JOB.yaml] [--set K=V ...]
 * [--max-bytes N]. argv[0] is "export". Returns the exit status: 0; 1 when
 * the set is incomplete, corrupted, too large (the message gives the size)
 * or the file cannot be written; 2 on usage errors. */
int ctl_export_main(int argc, char **argv);

#endif
