/* A small JSON reader: enough for the emulator's configuration file.
 *
 * parse() builds a tree of json_value nodes; objects keep their keys in file order so that
 * error messages and duplicate-key checks can refer to them. Numbers are doubles (the config
 * only carries rates up to ~1e11 bit/s, well inside a double's exact integer range). */
#ifndef LINKEM_JSON_H
#define LINKEM_JSON_H

#include <stddef.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json_value {
    enum json_type type;
    int boolean;
    double number;
    char *string;               /* JSON_STRING: NUL-terminated UTF-8 */
    size_t count;               /* JSON_ARRAY / JSON_OBJECT: number of items */
    struct json_value **items;  /* JSON_ARRAY / JSON_OBJECT: the values */
    char **keys;                /* JSON_OBJECT: the keys, parallel to items */
};

/* Parses text (NUL-terminated). On failure returns NULL and writes a message with the line
 * number into err. */
struct json_value *json_parse(const char *text, char *err, size_t errlen);
void json_free(struct json_value *v);

/* Member of an object by key, or NULL when absent (or when v is not an object). */
const struct json_value *json_get(const struct json_value *v, const char *key);

const char *json_type_name(enum json_type t);

#endif
