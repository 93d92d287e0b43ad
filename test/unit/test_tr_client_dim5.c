/* test_tr_client_dim5.c - test_tr_client.c with rows of 5 floats: the round
 * merge's row copies and sums (tr_client.c) at a width that is not a multiple
 * of their 4-float vectors, so their scalar tails run (make run's rows are
 * embedding_dim + 1 = 17 floats). */
#define DIM 5
#include "test_tr_client.c"
