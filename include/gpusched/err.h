/*
 * gpusched error space.
 *
 * Every function in the project that can fail returns an int: GS_OK (0) on success or one of
 * the negative codes below. The list is a single X-macro so that the enum, gs_strerror() and
 * gs_errname() can never drift apart (the pattern of libuv's UV_ERRNO_MAP).
 */
#ifndef GPUSCHED_ERR_H
#define GPUSCHED_ERR_H

#define GS_ERR_MAP(X)                                                                              \
    X(ENOMEM, -1, "out of memory")                                                                 \
    X(EINVAL, -2, "invalid argument")                                                              \
    X(EPARSE, -3, "malformed input")                                                               \
    X(EIO, -4, "input/output error")                                                               \
    X(ENOENT, -5, "no such entry")                                                                 \
    X(EUNSCHEDULABLE, -6, "no node can host the pod")                                              \
    X(ERANGE, -7, "value out of range")                                                            \
    X(EEXIST, -8, "entry already exists")                                                          \
    X(ELIMIT, -9, "a fixed limit was reached")                                                     \
    X(ECONFLICT, -10, "conflict with the current state of the object")                             \
    X(EGONE, -11, "resource version too old (gone)")                                               \
    X(EREJECTED, -12, "the server rejected the object as invalid")                                 \
    X(ETHROTTLED, -13, "too many requests; retry later")                                           \
    X(EAUTH, -14, "not authenticated or not authorized")                                           \
    X(EHTTP, -15, "unexpected HTTP status")                                                        \
    X(ETIMEDOUT, -16, "timed out")

/** Error codes. GS_OK is success; every other value is negative. */
enum gs_err {
    GS_OK = 0,
#define GS_ERR_ENUM(name, value, text) GS_##name = (value),
    GS_ERR_MAP(GS_ERR_ENUM)
#undef GS_ERR_ENUM
};

/**
 * Returns a static, human-readable sentence for an error code ("out of memory").
 * @param err  a value of enum gs_err; unknown values give "unknown error".
 * @return     a string with static storage; never NULL. Thread-safe.
 */
const char *gs_strerror(int err);

/**
 * Returns the symbolic name of an error code ("GS_ENOMEM").
 * @param err  a value of enum gs_err; unknown values give "GS_E?".
 * @return     a string with static storage; never NULL. Thread-safe.
 */
const char *gs_errname(int err);

#endif /* GPUSCHED_ERR_H */
