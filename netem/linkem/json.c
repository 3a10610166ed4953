/* Recursive-descent JSON reader (RFC 8259), written for the emulator's small config files. */
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

struct parser {
    const char *s;
    const char *start;
    char *err;
    size_t errlen;
    int failed;
};

static void fail(struct parser *p, const char *fmt, ...)
{
    if (p->failed)
        return;
    p->failed = 1;
    int line = 1;
    for (const char *c = p->start; c < p->s; c++)
        line += *c == '\n';
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "invalid JSON at line %d: %s", line, msg);
}

static void skip_ws(struct parser *p)
{
    while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')
        p->s++;
}

static struct json_value *new_value(enum json_type t)
{
    struct json_value *v = calloc(1, sizeof *v);
    if (!v) {
        perror("calloc");
        exit(1);
    }
    v->type = t;
    return v;
}

static void *xrealloc(void *ptr, size_t n)
{
    void *r = realloc(ptr, n);
    if (!r) {
        perror("realloc");
        exit(1);
    }
    return r;
}

static int hex4(struct parser *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else {
            fail(p, "bad \\u escape");
            return -1;
        }
    }
    p->s += 4;
    *out = v;
    return 0;
}

static size_t put_utf8(char *dst, unsigned cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* p->s points at the opening quote. The decoded string is never longer than the source. */
static char *parse_string_raw(struct parser *p)
{
    const char *q = ++p->s;
    size_t cap = 0;
    while (q[cap] && q[cap] != '"') {
        if (q[cap] == '\\' && q[cap + 1])
            cap++;
        cap++;
    }
    char *out = malloc(cap + 1);
    if (!out) {
        perror("malloc");
        exit(1);
    }
    size_t n = 0;
    for (;;) {
        unsigned char c = (unsigned char)*p->s;
        if (c == '\0') {
            fail(p, "unterminated string");
            break;
        }
        if (c == '"') {
            p->s++;
            out[n] = '\0';
            return out;
        }
        if (c < 0x20) {
            fail(p, "control character in string");
            break;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            p->s++;
            continue;
        }
        p->s++;
        char e = *p->s++;
        switch (e) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (hex4(p, &cp) < 0)
                goto bad;
            if (cp >= 0xD800 && cp < 0xDC00 && p->s[0] == '\\' && p->s[1] == 'u') {
                unsigned lo;
                p->s += 2;
                if (hex4(p, &lo) < 0)
                    goto bad;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            /* \uXXXX (6 source bytes) never decodes to more than 4 bytes */
            n += put_utf8(out + n, cp);
            break;
        }
        default:
            fail(p, "bad escape \\%c", e);
            goto bad;
        }
    }
bad:
    free(out);
    return NULL;
}

static struct json_value *parse_value(struct parser *p, int depth);

static struct json_value *parse_container(struct parser *p, int depth, int is_object)
{
    struct json_value *v = new_value(is_object ? JSON_OBJECT : JSON_ARRAY);
    char close = is_object ? '}' : ']';
    p->s++;
    skip_ws(p);
    if (*p->s == close) {
        p->s++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(p);
        if (is_object) {
            if (*p->s != '"') {
                fail(p, "expected a quoted key");
                break;
            }
            key = parse_string_raw(p);
            if (!key)
                break;
            for (size_t i = 0; i < v->count; i++) {
                if (strcmp(v->keys[i], key) == 0) {
                    fail(p, "duplicate key \"%s\"", key);
                    break;
                }
            }
            skip_ws(p);
            if (p->failed || *p->s != ':') {
                fail(p, "expected ':' after key");
                free(key);
                break;
            }
            p->s++;
        }
        struct json_value *item = parse_value(p, depth + 1);
        if (!item) {
            free(key);
            break;
        }
        v->items = xrealloc(v->items, (v->count + 1) * sizeof *v->items);
        if (is_object)
            v->keys = xrealloc(v->keys, (v->count + 1) * sizeof *v->keys);
        v->items[v->count] = item;
        if (is_object)
            v->keys[v->count] = key;
        v->count++;
        skip_ws(p);
        if (*p->s == ',') {
            p->s++;
            continue;
        }
        if (*p->s == close) {
            p->s++;
            return v;
        }
        fail(p, "expected ',' or '%c'", close);
        break;
    }
    json_free(v);
    return NULL;
}

static struct json_value *parse_value(struct parser *p, int depth)
{
    if (depth > MAX_DEPTH) {
        fail(p, "nested too deeply");
        return NULL;
    }
    skip_ws(p);
    char c = *p->s;
    if (c == '{' || c == '[')
        return parse_container(p, depth, c == '{');
    if (c == '"') {
        char *s = parse_string_raw(p);
        if (!s)
            return NULL;
        struct json_value *v = new_value(JSON_STRING);
        v->string = s;
        return v;
    }
    if (strncmp(p->s, "true", 4) == 0 || strncmp(p->s, "false", 5) == 0) {
        struct json_value *v = new_value(JSON_BOOL);
        v->boolean = c == 't';
        p->s += v->boolean ? 4 : 5;
        return v;
    }
    if (strncmp(p->s, "null", 4) == 0) {
        p->s += 4;
        return new_value(JSON_NULL);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char *end;
        double d = strtod(p->s, &end);
        if (end == p->s) {
            fail(p, "bad number");
            return NULL;
        }
        p->s = end;
        struct json_value *v = new_value(JSON_NUMBER);
        v->number = d;
        return v;
    }
    if (c == '\0')
        fail(p, "unexpected end of input");
    else
        fail(p, "unexpected character '%c'", c);
    return NULL;
}

struct json_value *json_parse(const char *text, char *err, size_t errlen)
{
    struct parser p = {.s = text, .start = text, .err = err, .errlen = errlen};
    struct json_value *v = parse_value(&p, 0);
    if (v) {
        skip_ws(&p);
        if (*p.s != '\0') {
            fail(&p, "trailing characters after the document");
            json_free(v);
            v = NULL;
        }
    }
    return v;
}

void json_free(struct json_value *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->count; i++) {
        json_free(v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
}

const struct json_value *json_get(const struct json_value *v, const char *key)
{
    if (!v || v->type != JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->count; i++)
        if (strcmp(v->keys[i], key) == 0)
            return v->items[i];
    return NULL;
}

const char *json_type_name(enum json_type t)
{
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    }
    return "?";
}
