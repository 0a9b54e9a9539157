/*
 * unicode_class.h - the character classes the DeepSeek V4 pre-tokenizer regexes test, from a
 * generated two-stage table (unicode_class_table.c, tools/gen_unicode_tables.py; Unicode 16.0.0,
 * the version of the oracle's Oniguruma).
 */
#ifndef DS4RT_TOK_UNICODE_CLASS_H
#define DS4RT_TOK_UNICODE_CLASS_H

#include <stdint.h>

/* Class codes; the generator writes the same numbers. */
enum {
    DS4RT_UC_OTHER = 0,  /* C*: controls that are not \s, format, private use, unassigned */
    DS4RT_UC_LETTER = 1, /* \p{L} */
    DS4RT_UC_MARK = 2,   /* \p{M} */
    DS4RT_UC_NUMBER = 3, /* \p{N} */
    DS4RT_UC_PUNCT = 4,  /* \p{P} */
    DS4RT_UC_SYMBOL = 5, /* \p{S} */
    DS4RT_UC_SPACE = 6   /* \s: U+0009..U+000D, U+0085, Zs, Zl, Zp */
};

extern const char ds4rt_unicode_version[];
extern const uint16_t ds4rt_uclass_stage1[0x110000 >> 8];
extern const uint8_t ds4rt_uclass_stage2[];

/* Class of code point cp (cp < 0x110000). */
static inline int ds4rt_uclass(uint32_t cp) {
    return ds4rt_uclass_stage2[((uint32_t)ds4rt_uclass_stage1[cp >> 8] << 8) | (cp & 0xFF)];
}

#endif /* DS4RT_TOK_UNICODE_CLASS_H */
