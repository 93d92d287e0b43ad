/* ss_err.c - text for the SS_E* error codes. */
#include "ss_err.h"

const char *ss_strerror(int rc)
{
    switch (rc) {
#define SS_ERR_TEXT(name, value, text) case value: return text;
        SS_ERR_LIST(SS_ERR_TEXT)
#undef SS_ERR_TEXT
    }
    return "unknown error";
}

const char *ss_errname(int rc)
{
    switch (rc) {
#define SS_ERR_NAME(name, value, text) case value: return #name;
        SS_ERR_LIST(SS_ERR_NAME)
#undef SS_ERR_NAME
    }
    return "SS_E_UNKNOWN";
}
