/*
 * The gateway's SendBatch hot path in C: a serialized mq.gateway.v1.SendBatchRequest straight to a RocketMQ
 * MessageBatch body, and a stored MessageBatch's results straight to a serialized SendBatchResponse.
 *
 * What it replaces (and must equal, tests/gateway/test_gateway_wire.py): SendBatchRequest.FromString +
 * grpc_api.batch_from_protos + mq_client message_batch.prepare/_Prepared.encode, and grpc_api.chunks_to_proto +
 * SerializeToString for one stored chunk. It takes only the plain shape of a batch: every message of one topic,
 * with a body, maybe a tag, keys and a flag, and no sharding key, no user properties and no delay; either no message
 * has a transaction_id or every message has the same one (half messages of one transaction: the scan answers it and
 * the request's producer_group, which the caller puts in the batch's properties). Half messages may have user
 * properties when every message has the same ones, serialized the same (one run of map entries, byte for byte): the
 * scan answers that run (a serialized Message holding only them) and the caller sends them once, as the batch's
 * properties; the encoder leaves them out of the messages. Anything else (another wire type for a known field, a
 * group, a second topic, a sharding key, a property of a plain message or one that differs between half messages, a
 * delay, a second transaction id or a message without one among messages with one, a \x01 or \x02 in a tag, a key,
 * the transaction id or the producer group, text that is not UTF-8, a field number not in MESSAGE_FIELDS /
 * REQUEST_FIELDS) makes
 * scan_send_batch answer None and the caller parses the request with protobuf. The module exports MESSAGE_FIELDS
 * and REQUEST_FIELDS, the field numbers of mq.gateway.v1.Message and SendBatchRequest this file reads; a test
 * compares them with gateway.proto, so a field added there fails until this file handles it.
 *
 * Runs on the gateway's event loop thread, holding the GIL (the work is a few microseconds per batch).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* batch_codec's item: TOTALSIZE 4, MAGICCODE 4, BODYCRC 4, FLAG 4, BODYLEN 4, body, PROPERTIESLENGTH 2, properties */
#define ITEM_OVERHEAD 22
/* MessageConst.TAGS / KEYS with the \x01 that follows a name; KEY_SEPARATOR joins keys */
static const char TAGS_NAME[] = "TAGS\x01";
static const char KEYS_NAME[] = "KEYS\x01";
#define NAME_LEN 5
#define KEY_SEPARATOR ' '

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} cursor;

static int read_varint(cursor *c, uint64_t *out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64 && c->p < c->end; shift += 7) {
        uint8_t b = *c->p++;
        value |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = value;
            return 0;
        }
    }
    return -1;
}

/* One field: its number and wire type, its value (VARINT) or payload (LEN). */
typedef struct {
    uint32_t number;
    int wire_type;
    const uint8_t *data;
    Py_ssize_t len;
    uint64_t varint;
} field;

/* Read one field (the cursor moves past it); -1 for bytes that are not a field, groups included. */
static int read_field(cursor *c, field *f) {
    uint64_t key;
    if (read_varint(c, &key) < 0 || (key >> 3) == 0 || (key >> 3) > 0x1FFFFFFF) {
        return -1;
    }
    f->number = (uint32_t)(key >> 3);
    f->wire_type = (int)(key & 7);
    f->data = NULL;
    f->len = 0;
    f->varint = 0;
    switch (f->wire_type) {
    case WT_VARINT:
        return read_varint(c, &f->varint);
    case WT_FIXED64:
        if (c->end - c->p < 8) return -1;
        c->p += 8;
        return 0;
    case WT_FIXED32:
        if (c->end - c->p < 4) return -1;
        c->p += 4;
        return 0;
    case WT_LEN: {
        uint64_t n;
        if (read_varint(c, &n) < 0 || n > (uint64_t)(c->end - c->p)) return -1;
        f->data = c->p;
        f->len = (Py_ssize_t)n;
        c->p += n;
        return 0;
    }
    default: /* groups (3, 4) and invalid wire types: not the plain shape */
        return -1;
    }
}

/* Strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF), as protobuf requires of a string field. */
static int valid_utf8(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        int extra;
        uint32_t cp;
        if (b >= 0xC2 && b <= 0xDF) {
            extra = 1;
            cp = b & 0x1F;
        } else if (b >= 0xE0 && b <= 0xEF) {
            extra = 2;
            cp = b & 0x0F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            extra = 3;
            cp = b & 0x07;
        } else {
            return 0;
        }
        if (n - i <= extra) return 0;
        for (int k = 1; k <= extra; k++) {
            uint8_t cb = s[i + k];
            if ((cb & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (cb & 0x3F);
        }
        if ((extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
            return 0;
        }
        i += extra + 1;
    }
    return 1;
}

/* Property text may not hold RocketMQ's separators. */
static int plain_text(const uint8_t *s, Py_ssize_t n) {
    return memchr(s, 1, (size_t)n) == NULL && memchr(s, 2, (size_t)n) == NULL && valid_utf8(s, n);
}

/* One mq.gateway.v1.Message: topic 1, body 2, tag 3, keys 4 (repeated), sharding_key 5, properties 6, flag 7. */
typedef struct {
    const uint8_t *topic;
    Py_ssize_t topic_len;
    const uint8_t *body;
    Py_ssize_t body_len;
    const uint8_t *tag;
    Py_ssize_t tag_len;
    Py_ssize_t key_count;
    Py_ssize_t key_bytes;
    int32_t flag;
    const uint8_t *transaction_id;
    Py_ssize_t transaction_id_len;
    const uint8_t *props; /* the run of properties (6) fields, tags and lengths included */
    Py_ssize_t props_len;
} message_view;

/* 1 for a plain message, 0 for another shape, -1 for bytes that are not a message. */
static int parse_message(const uint8_t *data, Py_ssize_t len, message_view *m) {
    cursor c = {data, data + len};
    memset(m, 0, sizeof *m);
    m->topic = m->body = m->tag = m->transaction_id = m->props = data;
    field f;
    while (c.p < c.end) {
        const uint8_t *start = c.p;
        if (read_field(&c, &f) < 0) return -1;
        if (f.number >= 1 && f.number <= 6 && f.wire_type != WT_LEN) return 0;
        if (f.number >= 7 && f.number <= 11 && f.wire_type != WT_VARINT) return 0;
        switch (f.number) {
        case 1:
            m->topic = f.data;
            m->topic_len = f.len;
            break;
        case 2:
            m->body = f.data;
            m->body_len = f.len;
            break;
        case 3:
            m->tag = f.data;
            m->tag_len = f.len;
            break;
        case 4:
            if (!plain_text(f.data, f.len)) return 0;
            m->key_count++;
            m->key_bytes += f.len;
            break;
        case 5:
            if (f.len) return 0;
            break;
        case 6: /* user properties: one run of map entries (entries split by another field: not the plain shape) */
            if (m->props_len == 0) {
                m->props = start;
            } else if (start != m->props + m->props_len) {
                return 0;
            }
            m->props_len = c.p - m->props;
            break;
        case 7:
            m->flag = (int32_t)(uint32_t)f.varint;
            break;
        case 8: /* delay_time_level, deliver_time_ms, delay_time_sec, delay_time_ms: a delayed message never goes */
        case 9: /* in a MessageBatch (the producer sends it alone), so a non-zero one is not the plain shape */
        case 10:
        case 11:
            if (f.varint) return 0;
            break;
        case 12: /* transaction_id: the batch's messages must agree on it (scan_visit) */
            if (f.wire_type != WT_LEN) return 0;
            m->transaction_id = f.data;
            m->transaction_id_len = f.len;
            break;
        default: /* a field this file does not know (MESSAGE_FIELDS): protobuf's path decides what it means */
            return 0;
        }
    }
    if (m->tag_len && !plain_text(m->tag, m->tag_len)) return 0;
    if (m->transaction_id_len && !plain_text(m->transaction_id, m->transaction_id_len)) return 0;
    if (m->props_len && !m->transaction_id_len) return 0; /* a plain message's properties: the protobuf path */
    return 1;
}

/* Bytes of TAGS / KEYS property text of a message (0 when it has none). */
static Py_ssize_t extra_props_len(const message_view *m) {
    Py_ssize_t n = 0;
    if (m->tag_len) n += NAME_LEN + m->tag_len + 1;
    if (m->key_count) n += NAME_LEN + m->key_bytes + (m->key_count - 1) + 1;
    return n;
}

typedef int (*message_visitor)(const uint8_t *data, Py_ssize_t len, void *state);

/* Walk a SendBatchRequest (messages 1, producer_group 2, send_timeout_ms 3). 1 plain, 0 other shape, -1 bad.
 * ``group`` / ``group_len``: the producer group (the last one, as protobuf reads it; empty when absent). */
static int walk_request(const uint8_t *data, Py_ssize_t len, int64_t *timeout_ms, const uint8_t **group,
                        Py_ssize_t *group_len, message_visitor visit, void *state) {
    cursor c = {data, data + len};
    *timeout_ms = 0;
    *group = data;
    *group_len = 0;
    field f;
    while (c.p < c.end) {
        if (read_field(&c, &f) < 0) return -1;
        if ((f.number == 1 || f.number == 2) && f.wire_type != WT_LEN) return 0;
        if (f.number == 3 && f.wire_type != WT_VARINT) return 0;
        if (f.number == 1) {
            int r = visit(f.data, f.len, state);
            if (r != 1) return r;
        } else if (f.number == 2) {
            if (!valid_utf8(f.data, f.len)) return 0;
            *group = f.data;
            *group_len = f.len;
        } else if (f.number == 3) {
            *timeout_ms = (int64_t)f.varint;
        } else {
            return 0; /* a field this file does not know (REQUEST_FIELDS) */
        }
    }
    return 1;
}

typedef struct {
    Py_ssize_t count;
    const uint8_t *topic;
    Py_ssize_t topic_len;
    Py_ssize_t min_body;
    Py_ssize_t max_body;
    Py_ssize_t body_bytes;
    Py_ssize_t extra_bytes;
    Py_ssize_t max_extra;
    const uint8_t *transaction_id;
    Py_ssize_t transaction_id_len;
    const uint8_t *props;
    Py_ssize_t props_len;
} scan_state;

static int scan_visit(const uint8_t *data, Py_ssize_t len, void *state) {
    scan_state *s = state;
    message_view m;
    int r = parse_message(data, len, &m);
    if (r != 1) return r;
    if (s->count == 0) {
        if (!valid_utf8(m.topic, m.topic_len)) return 0;
        s->topic = m.topic;
        s->topic_len = m.topic_len;
        s->min_body = m.body_len;
        s->transaction_id = m.transaction_id;
        s->transaction_id_len = m.transaction_id_len;
        s->props = m.props;
        s->props_len = m.props_len;
    } else if (m.topic_len != s->topic_len || memcmp(m.topic, s->topic, (size_t)m.topic_len) != 0 ||
               m.transaction_id_len != s->transaction_id_len ||
               memcmp(m.transaction_id, s->transaction_id, (size_t)m.transaction_id_len) != 0 ||
               m.props_len != s->props_len || memcmp(m.props, s->props, (size_t)m.props_len) != 0) {
        return 0;
    }
    Py_ssize_t extra = extra_props_len(&m);
    s->count++;
    s->min_body = m.body_len < s->min_body ? m.body_len : s->min_body;
    s->max_body = m.body_len > s->max_body ? m.body_len : s->max_body;
    s->body_bytes += m.body_len;
    s->extra_bytes += extra;
    s->max_extra = extra > s->max_extra ? extra : s->max_extra;
    return 1;
}

static PyObject *scan_send_batch(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer raw;
    if (PyObject_GetBuffer(arg, &raw, PyBUF_SIMPLE) < 0) return NULL;
    scan_state s = {0};
    int64_t timeout_ms;
    const uint8_t *group;
    Py_ssize_t group_len;
    int r = walk_request(raw.buf, raw.len, &timeout_ms, &group, &group_len, scan_visit, &s);
    PyObject *result;
    if (r != 1 || s.count == 0 || (s.transaction_id_len && !plain_text(group, group_len))) {
        result = Py_NewRef(Py_None);
    } else {
        result = Py_BuildValue("(s#nLnnnnns#s#y#)", (const char *)s.topic, s.topic_len, s.count,
                               (long long)timeout_ms, s.min_body, s.max_body, s.body_bytes, s.extra_bytes, s.max_extra,
                               (const char *)s.transaction_id, s.transaction_id_len, (const char *)group,
                               s.transaction_id_len ? group_len : (Py_ssize_t)0, (const char *)s.props, s.props_len);
    }
    PyBuffer_Release(&raw);
    return result;
}

static uint8_t *put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return p + 4;
}

static uint8_t *put(uint8_t *p, const void *src, Py_ssize_t n) {
    memcpy(p, src, (size_t)n);
    return p + n;
}

typedef struct {
    uint8_t *out;
    uint8_t *end;
    PyObject *ids;
    Py_ssize_t index;
    const uint8_t *fixed;
    Py_ssize_t fixed_len;
} encode_state;

static int encode_visit(const uint8_t *data, Py_ssize_t len, void *state) {
    encode_state *s = state;
    message_view m;
    if (parse_message(data, len, &m) != 1 || s->index >= PyList_GET_SIZE(s->ids)) return -1;
    Py_ssize_t id_len;
    const char *id = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(s->ids, s->index), &id_len);
    if (id == NULL) return -2;
    s->index++;
    Py_ssize_t props_len = extra_props_len(&m) + s->fixed_len + id_len + 1;
    Py_ssize_t size = ITEM_OVERHEAD + m.body_len + props_len;
    if (props_len > 0x7FFF || size > s->end - s->out) return -1;
    uint8_t *p = s->out;
    p = put_be32(p, (uint32_t)size);
    p = put_be32(p, 0);
    p = put_be32(p, 0);
    p = put_be32(p, (uint32_t)m.flag);
    p = put_be32(p, (uint32_t)m.body_len);
    p = put(p, m.body, m.body_len);
    *p++ = (uint8_t)(props_len >> 8);
    *p++ = (uint8_t)props_len;
    if (m.tag_len) {
        p = put(p, TAGS_NAME, NAME_LEN);
        p = put(p, m.tag, m.tag_len);
        *p++ = 2;
    }
    if (m.key_count) {
        p = put(p, KEYS_NAME, NAME_LEN);
        cursor c = {data, data + len};
        Py_ssize_t written = 0;
        field f;
        while (c.p < c.end && read_field(&c, &f) == 0) { /* parsed whole above */
            if (f.number == 4) {
                if (written++) *p++ = KEY_SEPARATOR;
                p = put(p, f.data, f.len);
            }
        }
        *p++ = 2;
    }
    p = put(p, s->fixed, s->fixed_len);
    p = put(p, id, id_len);
    *p++ = 2;
    s->out = p;
    return 1;
}

static PyObject *encode_send_batch(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer raw, fixed;
    PyObject *ids;
    Py_ssize_t total;
    if (!PyArg_ParseTuple(args, "y*O!y*n", &raw, &PyList_Type, &ids, &fixed, &total)) return NULL;
    PyObject *body = total >= 0 ? PyBytes_FromStringAndSize(NULL, total) : NULL;
    if (body != NULL) {
        uint8_t *out = (uint8_t *)PyBytes_AS_STRING(body);
        encode_state s = {out, out + total, ids, 0, fixed.buf, fixed.len};
        int64_t timeout_ms;
        const uint8_t *group;
        Py_ssize_t group_len;
        int r = walk_request(raw.buf, raw.len, &timeout_ms, &group, &group_len, encode_visit, &s);
        if (r == -2) {
            Py_CLEAR(body);
        } else if (r != 1 || s.out != out + total || s.index != PyList_GET_SIZE(ids)) {
            Py_CLEAR(body);
            PyErr_SetString(PyExc_ValueError, "the request, the ids and total_bytes do not match a scanned batch");
        }
    } else if (total < 0) {
        PyErr_SetString(PyExc_ValueError, "total_bytes must not be negative");
    }
    PyBuffer_Release(&raw);
    PyBuffer_Release(&fixed);
    return body;
}

static Py_ssize_t varint_len(uint64_t v) {
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* A string field's bytes on the wire (0 when empty: proto3 leaves defaults out). */
static Py_ssize_t text_field_len(Py_ssize_t n) { return n ? 1 + varint_len((uint64_t)n) + n : 0; }

static uint8_t *put_text_field(uint8_t *p, uint8_t key, const char *s, Py_ssize_t n) {
    if (!n) return p;
    *p++ = key;
    p = put_varint(p, (uint64_t)n);
    return put(p, s, n);
}

/* SendResult: send_status 3, msg_id 4, offset_msg_id 5, broker_name 6, queue_id 7, queue_offset 8 (code 0 left out) */
static PyObject *encode_batch_response(PyObject *self, PyObject *args) {
    (void)self;
    int send_status, queue_id;
    PyObject *msg_ids, *offset_ids;
    const char *broker;
    Py_ssize_t broker_len;
    long long first_offset;
    if (!PyArg_ParseTuple(args, "iO!O!s#iL", &send_status, &PyList_Type, &msg_ids, &PyList_Type, &offset_ids,
                          &broker, &broker_len, &queue_id, &first_offset)) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(msg_ids);
    if (PyList_GET_SIZE(offset_ids) != count) {
        PyErr_SetString(PyExc_ValueError, "one offset msg id per msg id");
        return NULL;
    }
    /* every result has the same fixed part; ids and queue offsets vary */
    uint64_t status_wire = (uint64_t)(int64_t)send_status, queue_wire = (uint64_t)(int64_t)queue_id;
    Py_ssize_t fixed = (send_status ? 1 + varint_len(status_wire) : 0) + text_field_len(broker_len) +
                       (queue_id ? 1 + varint_len(queue_wire) : 0);
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *a = PyList_GET_ITEM(msg_ids, i), *b = PyList_GET_ITEM(offset_ids, i);
        if (!PyUnicode_Check(a) || !PyUnicode_Check(b)) {
            PyErr_SetString(PyExc_TypeError, "msg ids must be str");
            return NULL;
        }
        Py_ssize_t a_len, b_len;
        if (PyUnicode_AsUTF8AndSize(a, &a_len) == NULL || PyUnicode_AsUTF8AndSize(b, &b_len) == NULL) return NULL;
        uint64_t offset = (uint64_t)(first_offset + i);
        Py_ssize_t one = fixed + text_field_len(a_len) + text_field_len(b_len) + (offset ? 1 + varint_len(offset) : 0);
        total += 1 + varint_len((uint64_t)one) + one;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) return NULL;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t a_len, b_len;
        const char *a = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(msg_ids, i), &a_len);
        const char *b = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(offset_ids, i), &b_len);
        uint64_t offset = (uint64_t)(first_offset + i);
        Py_ssize_t one = fixed + text_field_len(a_len) + text_field_len(b_len) + (offset ? 1 + varint_len(offset) : 0);
        *p++ = 0x0A; /* results = 1, LEN */
        p = put_varint(p, (uint64_t)one);
        if (send_status) {
            *p++ = 0x18;
            p = put_varint(p, status_wire);
        }
        p = put_text_field(p, 0x22, a, a_len);
        p = put_text_field(p, 0x2A, b, b_len);
        p = put_text_field(p, 0x32, broker, broker_len);
        if (queue_id) {
            *p++ = 0x38;
            p = put_varint(p, queue_wire);
        }
        if (offset) {
            *p++ = 0x40;
            p = put_varint(p, offset);
        }
    }
    assert(p == (uint8_t *)PyBytes_AS_STRING(out) + total);
    return out;
}

static PyMethodDef methods[] = {
    {"scan_send_batch", scan_send_batch, METH_O,
     "scan_send_batch(raw) -> (topic, count, send_timeout_ms, min_body, max_body, body_bytes, extra_bytes, "
     "max_extra, transaction_id, producer_group, shared_properties) | None"},
    {"encode_send_batch", encode_send_batch, METH_VARARGS,
     "encode_send_batch(raw, ids, fixed_properties, total_bytes) -> MessageBatch body"},
    {"encode_batch_response", encode_batch_response, METH_VARARGS,
     "encode_batch_response(send_status, msg_ids, offset_msg_ids, broker_name, queue_id, first_queue_offset) -> "
     "serialized SendBatchResponse"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wire", NULL, 0, methods, NULL, NULL, NULL, NULL};

/* The field numbers parse_message and walk_request read (every other number takes the protobuf path). */
static const int MESSAGE_FIELDS[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
static const int REQUEST_FIELDS[] = {1, 2, 3};

static int add_field_set(PyObject *mod, const char *name, const int *numbers, size_t count) {
    PyObject *items = PyTuple_New((Py_ssize_t)count);
    if (items == NULL) return -1;
    for (size_t i = 0; i < count; i++) {
        PyObject *number = PyLong_FromLong(numbers[i]);
        if (number == NULL) {
            Py_DECREF(items);
            return -1;
        }
        PyTuple_SET_ITEM(items, (Py_ssize_t)i, number);
    }
    PyObject *set = PyFrozenSet_New(items);
    Py_DECREF(items);
    if (set == NULL) return -1;
    if (PyModule_AddObject(mod, name, set) < 0) {
        Py_DECREF(set);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__wire(void) {
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL) return NULL;
    if (add_field_set(mod, "MESSAGE_FIELDS", MESSAGE_FIELDS, sizeof MESSAGE_FIELDS / sizeof *MESSAGE_FIELDS) < 0 ||
        add_field_set(mod, "REQUEST_FIELDS", REQUEST_FIELDS, sizeof REQUEST_FIELDS / sizeof *REQUEST_FIELDS) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
