/* ss_sigstart.h - a daemon's SIGTERM and SIGINT held from its first instant
 * until its handlers are installed.
 *
 * Between execve() and the sigaction() calls in main() a SIGTERM would kill
 * a daemon with the default action: its launcher would see a death by signal
 * (status 143) instead of the clean stop its handler leads to (a trainer's
 * job checkpoint and exit 75, a PS's "stopped" and exit 0). So shadow-ps and
 * shadow-trainer block SIGTERM and SIGINT before any code of theirs or of
 * their libraries runs: ss_sigstart_hold() from the executable's
 * .preinit_array (SS_SIGSTART_HOLD_AT_LOAD in the file of main()), which the
 * dynamic linker calls before the shared libraries' constructors (OpenBLAS
 * starts its thread pool in its constructor). The mask and a pending signal
 * survive execve(), so the trainer's re-execution (tr_blas.h) keeps them
 * held. Once the handlers are in, main() calls ss_sigstart_release(): a
 * signal that came meanwhile is pending and goes to the handler right then.
 *
 * Threads: the ones created while the signals are held inherit the mask
 * (OpenBLAS's pool): those signals never go to them. The PS releases
 * them only once its threads are started (the ZAP handler and the metrics
 * server keep them blocked too), so that they end its main thread's poll
 * at once; the trainer's threads come after the release (its own block
 * every signal; ZeroMQ's block them too).
 *
 * Not covered: the instant between execve() and .preinit_array, while the
 * dynamic linker maps and relocates the libraries (about 4 ms for the
 * PS's 33 libraries, measured): a SIGTERM there still takes the default
 * action. A starter
 * that blocks SIGTERM itself across its execve() (env
 * --block-signal=TERM) closes that too: the release unblocks what the
 * daemon inherited blocked. */
#ifndef SS_SIGSTART_H
#define SS_SIGSTART_H

/* Block SIGTERM and SIGINT in the calling thread (and so in every thread it
 * creates from now on). Async-signal-safe; any thread. */
void ss_sigstart_hold(void);

/* Unblock SIGTERM and SIGINT in the calling thread: one pending is delivered
 * to its handler before this returns. Main thread, after its sigaction()
 * calls. */
void ss_sigstart_release(void);

/* In the file of main(): have the dynamic linker call ss_sigstart_hold()
 * before anything else of the program and its libraries runs. (Sanitizers
 * leave .preinit_array entries alone; a shared library's are not called.) */
#define SS_SIGSTART_HOLD_AT_LOAD                                              \
    __attribute__((section(".preinit_array"), used)) static void (            \
        *const ss_sigstart_preinit_)(void) = ss_sigstart_hold

#endif
