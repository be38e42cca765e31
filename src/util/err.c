/*
 * Text for the error codes of include/gpusched/err.h, generated from the same X-macro.
 */
#include "gpusched/err.h"

const char *gs_strerror(int err)
{
    switch (err) {
    case GS_OK:
        return "success";
#define GS_ERR_TEXT(name, value, text)                                                             \
    case GS_##name:                                                                                \
        return text;
        GS_ERR_MAP(GS_ERR_TEXT)
#undef GS_ERR_TEXT
    default:
        return "unknown error";
    }
}

const char *gs_errname(int err)
{
    switch (err) {
    case GS_OK:
        return "GS_OK";
#define GS_ERR_NAME(name, value, text)                                                             \
    case GS_##name:                                                                                \
        return "GS_" #name;
        GS_ERR_MAP(GS_ERR_NAME)
#undef GS_ERR_NAME
    default:
        return "GS_E?";
    }
}
