/* ss_err.h - error codes shared by every ShadowSync module.
 *
 * Fallible functions return 0 or one of the negative SS_E* codes below.
 * ss_strerror() turns a code into a short English phrase. The codes also
 * travel on the wire as the reply status, so their values never change. */
#ifndef SS_ERR_H
#define SS_ERR_H

#define SS_ERR_LIST(X)                                                  \
    X(SS_OK, 0, "ok")                                                   \
    X(SS_E_NOMEM, -1, "out of memory")                                  \
    X(SS_E_INVAL, -2, "invalid argument")                               \
    X(SS_E_IO, -3, "input/output error")                                \
    X(SS_E_TIMEOUT, -4, "timed out")                                    \
    X(SS_E_PROTO, -5, "malformed message")                              \
    X(SS_E_VERSION, -6, "protocol version mismatch")                    \
    X(SS_E_CONFIG, -7, "configuration error")                           \
    X(SS_E_RANGE, -8, "out of range")                                   \
    X(SS_E_FULL, -9, "capacity reached")                                \
    X(SS_E_CORRUPT, -10, "corrupt data")                                \
    X(SS_E_NOTFOUND, -11, "not found")                                  \
    X(SS_E_TOOBIG, -12, "message too large")                            \
    X(SS_E_HASH, -13, "cluster config hash mismatch")                   \
    X(SS_E_EMPTY, -14, "not initialized")                               \
    X(SS_E_NET, -15, "network error")                                   \
    X(SS_E_STOPPED, -16, "stopped")                                     \
    X(SS_E_PEER, -17, "peer reported an error")                       \
    X(SS_E_NOHELLO, -18, "HELLO required first")                        \
    X(SS_E_DENIED, -19, "not allowed for this key")                     \
    X(SS_E_NOSPC, -20, "no space left on device")

enum ss_err {
#define SS_ERR_ENUM(name, value, text) name = value,
    SS_ERR_LIST(SS_ERR_ENUM)
#undef SS_ERR_ENUM
};

/* Return a static English phrase for rc (any int; unknown codes give
 * "unknown error"). Thread-safe. */
const char *ss_strerror(int rc);

/* Return the symbolic name of rc ("SS_E_TIMEOUT"), static. Thread-safe. */
const char *ss_errname(int rc);

#endif
