/* ss_sigstart.c - SIGTERM and SIGINT held until the handlers are in (see
 * ss_sigstart.h). */
#include "ss_sigstart.h"

#include <pthread.h>
#include <signal.h>

/* The signals a daemon's handlers take. */
static void s_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
}

void ss_sigstart_hold(void)
{
    sigset_t set;
    s_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void ss_sigstart_release(void)
{
    sigset_t set;
    s_set(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}
