/*
 * What the C files of mq_broker.store._native share: the message format v1 layout (_record_layout.h, generated
 * from mq_common/record_layout.py) and the broker's limits, big-endian byte helpers, the Java String#hashCode of
 * UTF-8 text, and the functions _native.c registers from the other files.
 */
#ifndef MQ_BROKER_STORE_NATIVE_H
#define MQ_BROKER_STORE_NATIVE_H

#include <Python.h>
#include <stdint.h>

#include "_record_layout.h"

#define MAX_TOPIC_BYTES 127
#define MAX_PROPERTIES_BYTES 32767
#define TRANSACTION_MASK (3 << 2)
#define TRANSACTION_PREPARED (1 << 2)
#define TRANSACTION_ROLLBACK (3 << 2)

/* The length of a record's BORNHOST / STOREHOST field for its SYSFLAG. */
#define BORN_HOST_LENGTH(sys_flag) (((sys_flag) & BORN_HOST_V6_FLAG) ? IPV6_HOST_BYTES : IPV4_HOST_BYTES)
#define STORE_HOST_LENGTH(sys_flag) (((sys_flag) & STORE_HOST_V6_FLAG) ? IPV6_HOST_BYTES : IPV4_HOST_BYTES)
/* Offsets of the fields that follow BORNHOST, given the host lengths: STORETIMESTAMP, then BODYLEN. */
#define STORE_TIMESTAMP_AT(born_len) (BORN_HOST_OFFSET + (born_len))
#define BODY_LENGTH_AT(born_len, store_len)                                                                 \
    (STORE_TIMESTAMP_AT(born_len) + STORE_TIMESTAMP_BYTES + (store_len) + RECONSUME_TIMES_BYTES + \
     PREPARED_TRANSACTION_OFFSET_BYTES)

static inline void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void put_u64(unsigned char *p, uint64_t v) {
    put_u32(p, (uint32_t)(v >> 32));
    put_u32(p + 4, (uint32_t)v);
}

static inline uint32_t get_u32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline uint64_t get_u64(const unsigned char *p) { return ((uint64_t)get_u32(p) << 32) | get_u32(p + 4); }

/* Java String#hashCode continued over the UTF-16 code units of UTF-8 text (valid UTF-8: it came from a str). */
static inline uint32_t hash_utf8(uint32_t h, const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint32_t c = s[i];
        if (c < 0x80) {
            i += 1;
        } else if (c < 0xE0) {
            c = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F);
            i += 2;
        } else if (c < 0xF0) {
            c = ((c & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
            i += 3;
        } else {
            c = ((c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) | ((uint32_t)(s[i + 2] & 0x3F) << 6) |
                (s[i + 3] & 0x3F);
            i += 4;
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            c = 0xDC00 + (c & 0x3FF);
        }
        h = 31 * h + c;
    }
    return h;
}

/* _reput.c */
extern const char reput_records_doc[];
PyObject *reput_records(PyObject *self, PyObject *args);

#endif
