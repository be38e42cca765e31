/*
 * Kubernetes quantities and times. The number is read as an exact integer mantissa and a
 * decimal exponent, then scaled in long double (64-bit mantissa on x86-64), which is exact for
 * every integer the API sends below 2^63.
 */
#include "gpusched/kquantity.h"

#include <ctype.h>
#include <math.h>
#include <string.h>
#include <time.h>

struct suffix {
    const char *text;
    long double factor;
};

static const struct suffix suffixes[] = {
    {"Ki", 1024.0L},
    {"Mi", 1048576.0L},
    {"Gi", 1073741824.0L},
    {"Ti", 1099511627776.0L},
    {"Pi", 1125899906842624.0L},
    {"Ei", 1152921504606846976.0L},
    {"n", 1e-9L},
    {"u", 1e-6L},
    {"m", 1e-3L},
    {"k", 1e3L},
    {"M", 1e6L},
    {"G", 1e9L},
    {"T", 1e12L},
    {"P", 1e15L},
    {"E", 1e18L},
};

int gs_kquantity(const char *s, double unit, bool round_up, int64_t *out)
{
    if (!s || !*s || unit <= 0)
        return -1;
    const char *p = s;
    if (*p == '+')
        p++;
    if (*p == '-')
        return -1;
    uint64_t mant = 0;
    int exp10 = 0, digits = 0;
    bool dot = false;
    for (; isdigit((unsigned char)*p) || (*p == '.' && !dot); p++) {
        if (*p == '.') {
            dot = true;
            continue;
        }
        if (mant > (UINT64_MAX - 9) / 10) {
            if (!dot)
                exp10++; /* digits beyond precision: scale instead */
            continue;
        }
        mant = mant * 10 + (uint64_t)(*p - '0');
        digits++;
        if (dot)
            exp10--;
    }
    if (digits == 0)
        return -1;
    long double factor = 1.0L;
    if ((*p == 'e' || *p == 'E') &&
        (isdigit((unsigned char)p[1]) ||
         ((p[1] == '-' || p[1] == '+') && isdigit((unsigned char)p[2])))) {
        p++;
        int sign = 1, e = 0;
        if (*p == '-' || *p == '+')
            sign = *p++ == '-' ? -1 : 1;
        for (; isdigit((unsigned char)*p); p++) {
            e = e * 10 + (*p - '0');
            if (e > 400)
                return -1;
        }
        exp10 += sign * e;
    } else if (*p) {
        bool found = false;
        for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]) && !found; i++) {
            if (strcmp(p, suffixes[i].text) == 0) {
                factor = suffixes[i].factor;
                found = true;
            }
        }
        if (!found)
            return -1;
        p += strlen(p);
    }
    if (*p)
        return -1;
    long double v = (long double)mant * factor * powl(10.0L, (long double)exp10) / unit;
    /* Absorb the rounding noise of decimal scaling before rounding to a whole unit. */
    long double nearest = roundl(v);
    if (fabsl(v - nearest) < 1e-9L * (nearest > 1 ? nearest : 1))
        v = nearest;
    v = round_up ? ceill(v) : floorl(v);
    if (!(v < 9.2e18L))
        return -1;
    *out = (int64_t)v;
    return 0;
}

static int digits_n(const char **p, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (!isdigit((unsigned char)**p))
            return -1;
        v = v * 10 + (**p - '0');
    }
    return v;
}

int gs_ktime_ms(const char *s, int64_t *out)
{
    if (!s)
        return -1;
    const char *p = s;
    int y = digits_n(&p, 4);
    if (y < 0 || *p++ != '-')
        return -1;
    int mo = digits_n(&p, 2);
    if (mo < 1 || mo > 12 || *p++ != '-')
        return -1;
    int d = digits_n(&p, 2);
    if (d < 1 || d > 31 || (*p != 'T' && *p != 't' && *p != ' '))
        return -1;
    p++;
    int h = digits_n(&p, 2);
    if (h < 0 || h > 23 || *p++ != ':')
        return -1;
    int mi = digits_n(&p, 2);
    if (mi < 0 || mi > 59 || *p++ != ':')
        return -1;
    int sec = digits_n(&p, 2);
    if (sec < 0 || sec > 60)
        return -1;
    int64_t ms = 0;
    if (*p == '.') {
        p++;
        int scale = 100, nd = 0;
        for (; isdigit((unsigned char)*p); p++, nd++) {
            ms += (int64_t)scale * (*p - '0');
            scale /= 10;
        }
        if (nd == 0)
            return -1;
    }
    int off_min = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1;
        int oh = digits_n(&p, 2);
        if (oh < 0 || *p++ != ':')
            return -1;
        int om = digits_n(&p, 2);
        if (om < 0)
            return -1;
        off_min = sign * (oh * 60 + om);
    } else {
        return -1;
    }
    if (*p)
        return -1;
    /* Days from civil (Howard Hinnant's algorithm), no time zone involved. */
    int yy = y - (mo <= 2);
    int era = (yy >= 0 ? yy : yy - 399) / 400;
    int yoe = yy - era * 400;
    int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = (int64_t)era * 146097 + doe - 719468;
    *out = ((days * 86400 + (int64_t)h * 3600 + (int64_t)mi * 60 + sec) - (int64_t)off_min * 60) *
               1000 +
           ms;
    return 0;
}
