/*
 * mq_broker.store._native: the CommitLog append loop of one batch, and its index entries, in C.
 *
 * Mirrors org.apache.rocketmq.store.CommitLog.DefaultAppendMessageCallback#doAppend (message format v1): for
 * every message that needs no special handling it fills QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP and
 * STOREHOST, computes BODYCRC (zlib crc32, sign bit cleared) and writes the record straight into the mapped
 * file. It stops at the first message the Python path must handle (a limit exceeded, a record too large for
 * any file, or no room left in this file: END_OF_FILE), so rolling files and refusing messages stay in
 * commit_log.py. Records are byte-identical to mq_common.codec.encode_message (a test checks it).
 *
 * Runs on the event loop thread with the GIL held (the mapped file must not change under it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MESSAGE_MAGIC_CODE 0xDAA320A7u
#define END_FILE_MIN_BLANK_LENGTH 8
#define MAX_TOPIC_BYTES 127
#define MAX_PROPERTIES_BYTES 32767
#define BORNHOST_V6_FLAG (1 << 4)
#define STOREHOST_V6_FLAG (1 << 5)
#define TRANSACTION_MASK (3 << 2)
#define TRANSACTION_PREPARED (1 << 2)
#define TRANSACTION_ROLLBACK (3 << 2)
#define FIXED_BYTES (4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 4 + 8)

static PyObject *crc32_func;  /* zlib.crc32 */
static PyObject *s_topic, *s_queue_id, *s_body, *s_properties_string, *s_flag, *s_sys_flag, *s_born_ts,
    *s_born_host, *s_reconsume_times, *s_tags_code;

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

/* The fields of one message, borrowed or owned as marked. */
typedef struct {
    PyObject *topic_obj, *body_obj, *props_obj, *born_host_obj, *tags_obj; /* owned */
    const char *topic;
    Py_ssize_t topic_len;
    const char *props;
    Py_ssize_t props_len;
    const char *body;
    Py_ssize_t body_len;
    const char *born_host;
    Py_ssize_t born_host_len;
    long long queue_id, flag, sys_flag, born_ts, reconsume_times;
} Fields;

static void fields_release(Fields *f) {
    Py_XDECREF(f->topic_obj);
    Py_XDECREF(f->body_obj);
    Py_XDECREF(f->props_obj);
    Py_XDECREF(f->born_host_obj);
    Py_XDECREF(f->tags_obj);
}

static int get_ll(PyObject *msg, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(msg, name);
    if (v == NULL) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* 0 on success, -1 with an exception set. */
static int fields_read(PyObject *msg, Fields *f) {
    memset(f, 0, sizeof(*f));
    if ((f->topic_obj = PyObject_GetAttr(msg, s_topic)) == NULL) return -1;
    if ((f->topic = PyUnicode_AsUTF8AndSize(f->topic_obj, &f->topic_len)) == NULL) return -1;
    if ((f->props_obj = PyObject_GetAttr(msg, s_properties_string)) == NULL) return -1;
    if ((f->props = PyUnicode_AsUTF8AndSize(f->props_obj, &f->props_len)) == NULL) return -1;
    if ((f->body_obj = PyObject_GetAttr(msg, s_body)) == NULL) return -1;
    if (!PyBytes_Check(f->body_obj)) {
        PyErr_SetString(PyExc_TypeError, "body must be bytes");
        return -1;
    }
    f->body = PyBytes_AS_STRING(f->body_obj);
    f->body_len = PyBytes_GET_SIZE(f->body_obj);
    if ((f->born_host_obj = PyObject_GetAttr(msg, s_born_host)) == NULL) return -1;
    if (!PyBytes_Check(f->born_host_obj)) {
        PyErr_SetString(PyExc_TypeError, "born_host must be bytes");
        return -1;
    }
    f->born_host = PyBytes_AS_STRING(f->born_host_obj);
    f->born_host_len = PyBytes_GET_SIZE(f->born_host_obj);
    if (f->born_host_len != 8 && f->born_host_len != 20) {
        PyErr_SetString(PyExc_ValueError, "born_host must be 8 or 20 bytes");
        return -1;
    }
    if (get_ll(msg, s_queue_id, &f->queue_id) || get_ll(msg, s_flag, &f->flag) ||
        get_ll(msg, s_sys_flag, &f->sys_flag) || get_ll(msg, s_born_ts, &f->born_ts) ||
        get_ll(msg, s_reconsume_times, &f->reconsume_times))
        return -1;
    if ((f->tags_obj = PyObject_GetAttr(msg, s_tags_code)) == NULL) return -1;
    return 0;
}

static int body_crc(const Fields *f, uint32_t *out) {
    PyObject *r = PyObject_CallOneArg(crc32_func, f->body_obj);
    if (r == NULL) return -1;
    unsigned long v = PyLong_AsUnsignedLong(r);
    Py_DECREF(r);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    *out = (uint32_t)(v & 0x7FFFFFFFu);
    return 0;
}

static void write_record(unsigned char *p, const Fields *f, uint32_t total, uint32_t crc, int64_t queue_offset,
                         int64_t phys, int32_t sys_flag, int64_t store_ts, const char *store_host,
                         Py_ssize_t store_host_len) {
    put_u32(p, total);
    put_u32(p + 4, MESSAGE_MAGIC_CODE);
    put_u32(p + 8, crc);
    put_u32(p + 12, (uint32_t)f->queue_id);
    put_u32(p + 16, (uint32_t)f->flag);
    put_u64(p + 20, (uint64_t)queue_offset);
    put_u64(p + 28, (uint64_t)phys);
    put_u32(p + 36, (uint32_t)sys_flag);
    put_u64(p + 40, (uint64_t)f->born_ts);
    p += 48;
    memcpy(p, f->born_host, (size_t)f->born_host_len);
    p += f->born_host_len;
    put_u64(p, (uint64_t)store_ts);
    p += 8;
    memcpy(p, store_host, (size_t)store_host_len);
    p += store_host_len;
    put_u32(p, (uint32_t)f->reconsume_times);
    put_u64(p + 4, 0); /* PREPAREDTRANSACTIONOFFSET */
    put_u32(p + 12, (uint32_t)f->body_len);
    p += 16;
    memcpy(p, f->body, (size_t)f->body_len);
    p += f->body_len;
    *p++ = (unsigned char)f->topic_len;
    memcpy(p, f->topic, (size_t)f->topic_len);
    p += f->topic_len;
    p[0] = (unsigned char)(f->props_len >> 8);
    p[1] = (unsigned char)f->props_len;
    memcpy(p + 2, f->props, (size_t)f->props_len);
}

/* The next queue offset of topic-queueId from the topic-queue table; stores offset + 1. -1 on error. */
static int64_t next_queue_offset(PyObject *table, const Fields *f) {
    PyObject *key = PyUnicode_FromFormat("%U-%lld", f->topic_obj, f->queue_id);
    if (key == NULL) return -1;
    int64_t offset = 0;
    PyObject *current = PyDict_GetItemWithError(table, key); /* borrowed */
    if (current != NULL) {
        offset = PyLong_AsLongLong(current);
        if (offset == -1 && PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
    } else if (PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    PyObject *next = PyLong_FromLongLong(offset + 1);
    int rc = next == NULL ? -1 : PyDict_SetItem(table, key, next);
    Py_XDECREF(next);
    Py_DECREF(key);
    return rc < 0 ? -1 : offset;
}

PyDoc_STRVAR(append_records_doc,
"append_records(buf, wrote_position, file_size, file_from_offset, messages, start, topic_queue_table,\n"
"               store_timestamp_ms, store_host, max_body_bytes, max_record_bytes) -> (stop, wrote_position, placed)\n"
"\n"
"Append messages[start:] as v1 records into the writable buffer ``buf`` (one mapped file of ``file_size``\n"
"bytes starting at CommitLog offset ``file_from_offset``) from ``wrote_position``, while each fits with room\n"
"for the 8-byte END_OF_FILE blank and needs no refusal. ``placed`` holds one (physical offset, size, queue\n"
"offset, tags code, dispatchable, sys flag) tuple per appended message; ``stop`` is the index of the first message not\n"
"appended (len(messages) when all were). Queue offsets come from and advance ``topic_queue_table``\n"
"('topic-queueId' -> next offset) for dispatchable messages (not prepared/rolled-back transactions).\n"
"Raises TypeError/ValueError for malformed message fields (nothing of that message is written).");

static PyObject *append_records(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *buf_obj, *messages, *table, *store_host_obj;
    Py_ssize_t pos, file_size, start;
    long long file_from, store_ts, max_body, max_record;
    if (!PyArg_ParseTuple(args, "OnnLOnO!LSLL", &buf_obj, &pos, &file_size, &file_from, &messages, &start,
                          &PyDict_Type, &table, &store_ts, &store_host_obj, &max_body, &max_record))
        return NULL;
    PyObject *seq = PySequence_Fast(messages, "messages must be a sequence");
    if (seq == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(buf_obj, &view, PyBUF_WRITABLE) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    const char *store_host = PyBytes_AS_STRING(store_host_obj);
    Py_ssize_t store_host_len = PyBytes_GET_SIZE(store_host_obj);
    PyObject *placed = PyList_New(0);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_ssize_t i = start;
    if (placed == NULL) goto error;
    if (file_size > view.len || pos < 0 || pos > file_size || (store_host_len != 8 && store_host_len != 20)) {
        PyErr_SetString(PyExc_ValueError, "bad buffer, position or store host");
        goto error;
    }
    for (; i < n; i++) {
        Fields f;
        if (fields_read(PySequence_Fast_GET_ITEM(seq, i), &f) < 0) {
            fields_release(&f);
            if (i == start) goto error;
            PyErr_Clear(); /* keep what is appended; the next call raises for this message */
            break;
        }
        int32_t sys_flag = (int32_t)(f.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG));
        if (f.born_host_len == 20) sys_flag |= BORNHOST_V6_FLAG;
        if (store_host_len == 20) sys_flag |= STOREHOST_V6_FLAG;
        long long total = FIXED_BYTES + f.born_host_len + store_host_len + 4 + f.body_len + 1 + f.topic_len + 2 +
                          f.props_len;
        if (f.body_len > max_body || f.topic_len > MAX_TOPIC_BYTES || f.props_len > MAX_PROPERTIES_BYTES ||
            total > max_record || total + END_FILE_MIN_BLANK_LENGTH > file_size ||
            total + END_FILE_MIN_BLANK_LENGTH > file_size - pos) {
            fields_release(&f);
            break; /* the Python path refuses it or rolls the file */
        }
        uint32_t crc;
        int tran = sys_flag & TRANSACTION_MASK;
        int dispatchable = tran != TRANSACTION_PREPARED && tran != TRANSACTION_ROLLBACK;
        int64_t queue_offset = 0;
        if (body_crc(&f, &crc) < 0 || (dispatchable && (queue_offset = next_queue_offset(table, &f)) < 0)) {
            fields_release(&f);
            goto error;
        }
        int64_t phys = file_from + pos;
        write_record((unsigned char *)view.buf + pos, &f, (uint32_t)total, crc, queue_offset, phys, sys_flag,
                     store_ts, store_host, store_host_len);
        PyObject *item = Py_BuildValue("(LLLOOi)", (long long)phys, total, (long long)queue_offset, f.tags_obj,
                                       dispatchable ? Py_True : Py_False, (int)sys_flag);
        fields_release(&f);
        if (item == NULL || PyList_Append(placed, item) < 0) {
            Py_XDECREF(item);
            goto error;
        }
        Py_DECREF(item);
        pos += (Py_ssize_t)total;
    }
    PyBuffer_Release(&view);
    Py_DECREF(seq);
    return Py_BuildValue("(nnN)", i, pos, placed);
error:
    PyBuffer_Release(&view);
    Py_DECREF(seq);
    Py_XDECREF(placed);
    return NULL;
}


/* ---------------------------------------------------------------------------------------------- IndexFile */

#define INDEX_HEADER_SIZE 40
#define HASH_SLOT_SIZE 4
#define INDEX_ENTRY_SIZE 20
#define TIME_DIFF_UNIT_MS 1000
static PyObject *s_wrote_offset, *s_store_ts;
static const char UNIQ_KEY_NAME[] = "UNIQ_KEY";
static const char KEYS_NAME[] = "KEYS";

static inline uint32_t get_u32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* Java String#hashCode continued over the UTF-16 code units of UTF-8 text (valid UTF-8: it came from a str). */
static uint32_t hash_utf8(uint32_t h, const unsigned char *s, Py_ssize_t n) {
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

/* IndexFile#indexKeyHashMethod: Math.abs of the hash (Integer.MIN_VALUE -> 0). */
static inline int32_t abs_hash(uint32_t h) {
    int32_t v = (int32_t)h;
    if (v == INT32_MIN) return 0;
    return v < 0 ? -v : v;
}

/* The value of ``name`` in a ``k\x01v\x02`` properties string (UTF-8), or NULL. */
static const unsigned char *property_value(const unsigned char *props, Py_ssize_t len, const char *name,
                                           Py_ssize_t name_len, Py_ssize_t *value_len) {
    Py_ssize_t i = 0;
    while (i < len) {
        const unsigned char *sep = memchr(props + i, 1, (size_t)(len - i));
        if (sep == NULL) return NULL;
        Py_ssize_t key_end = sep - props;
        const unsigned char *end = memchr(sep + 1, 2, (size_t)(len - key_end - 1));
        Py_ssize_t value_end = end == NULL ? len : end - props;
        if (key_end - i == name_len && memcmp(props + i, name, (size_t)name_len) == 0) {
            *value_len = value_end - key_end - 1;
            return sep + 1;
        }
        i = value_end + 1;
    }
    return NULL;
}

typedef struct {
    unsigned char *buf;
    Py_ssize_t hash_slot_num, entries_base;
    long long count;
    long long new_slots;
    long long begin_ts;
} IndexCursor;

static void put_key(IndexCursor *c, uint32_t topic_hash, const unsigned char *key, Py_ssize_t key_len,
                    long long phys, int32_t time_diff) {
    int32_t key_hash = abs_hash(hash_utf8(topic_hash, key, key_len));
    unsigned char *slot = c->buf + INDEX_HEADER_SIZE + (key_hash % c->hash_slot_num) * HASH_SLOT_SIZE;
    int32_t slot_value = (int32_t)get_u32(slot);
    if (slot_value <= 0 || slot_value >= c->count) {
        slot_value = 0;
        c->new_slots++;
    }
    unsigned char *entry = c->buf + c->entries_base + c->count * INDEX_ENTRY_SIZE;
    put_u32(entry, (uint32_t)key_hash);
    put_u64(entry + 4, (uint64_t)phys);
    put_u32(entry + 12, (uint32_t)time_diff);
    put_u32(entry + 16, (uint32_t)slot_value);
    put_u32(slot, (uint32_t)c->count);
    c->count++;
}

/* The next non-empty space-separated word of KEYS from *pos (advanced past it), or NULL when none is left. */
static const unsigned char *next_key_word(const unsigned char *keys, Py_ssize_t keys_len, Py_ssize_t *pos,
                                          Py_ssize_t *word_len) {
    Py_ssize_t i = *pos;
    while (keys != NULL && i < keys_len && keys[i] == ' ') i++;
    if (keys == NULL || i >= keys_len) return NULL;
    Py_ssize_t end = i;
    while (end < keys_len && keys[end] != ' ') end++;
    *pos = end;
    *word_len = end - i;
    return keys + i;
}

/* Number of index keys of one message: the UNIQ_KEY plus the non-empty words of KEYS. */
static Py_ssize_t count_keys(Py_ssize_t uniq_len, const unsigned char *keys, Py_ssize_t keys_len) {
    Py_ssize_t n = uniq_len > 0 ? 1 : 0, pos = 0, word_len;
    while (next_key_word(keys, keys_len, &pos, &word_len) != NULL) n++;
    return n;
}

PyDoc_STRVAR(index_messages_doc,
"index_messages(buf, hash_slot_num, index_count, max_index_count, begin_timestamp_ms, messages, results, start,\n"
"               last_indexed_phy_offset)\n"
"    -> (stop, index_count, new_hash_slots, last_entry_phy_offset, last_entry_timestamp_ms, last_indexed_phy_offset)\n"
"\n"
"IndexService#buildIndex for messages[start:] into one index file (writable ``buf``; RocketMQ's layout: 40-byte\n"
"header, ``hash_slot_num`` 4-byte slots, 20-byte entries [key hash i32][phy offset i64][time diff s i32]\n"
"[previous entry i32]): an entry for the UNIQ_KEY and for each KEYS word of every stored message (``results[i]``\n"
"has ``wrote_offset`` >= 0 and ``store_timestamp_ms``) past ``last_indexed_phy_offset`` that is not a rolled-back\n"
"transaction. Keys hash as IndexFile#indexKeyHashMethod of 'topic#key'. Stops before a message whose entries would\n"
"pass ``max_index_count`` or when the file holds no entry yet (``index_count`` 1: the Python path sets the begin\n"
"fields); ``stop`` is that message's index. The header is left to the caller.");

static PyObject *index_messages(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *buf_obj, *messages, *results;
    Py_ssize_t hash_slot_num, start;
    long long count, max_count, begin_ts, last_indexed;
    if (!PyArg_ParseTuple(args, "OnLLLOOnL", &buf_obj, &hash_slot_num, &count, &max_count, &begin_ts, &messages,
                          &results, &start, &last_indexed))
        return NULL;
    PyObject *mseq = PySequence_Fast(messages, "messages must be a sequence");
    if (mseq == NULL) return NULL;
    PyObject *rseq = PySequence_Fast(results, "results must be a sequence");
    if (rseq == NULL) {
        Py_DECREF(mseq);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(buf_obj, &view, PyBUF_WRITABLE) < 0) {
        Py_DECREF(mseq);
        Py_DECREF(rseq);
        return NULL;
    }
    IndexCursor c = {(unsigned char *)view.buf, hash_slot_num, INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE,
                     count, 0, begin_ts};
    Py_ssize_t n = PySequence_Fast_GET_SIZE(mseq);
    Py_ssize_t i = start;
    long long last_phys = -1, last_ts = 0;
    if (PySequence_Fast_GET_SIZE(rseq) != n || hash_slot_num <= 0 ||
        c.entries_base + max_count * INDEX_ENTRY_SIZE > view.len) {
        PyErr_SetString(PyExc_ValueError, "messages/results lengths differ or the index file is too small");
        goto error;
    }
    for (; i < n; i++) {
        PyObject *msg = PySequence_Fast_GET_ITEM(mseq, i), *res = PySequence_Fast_GET_ITEM(rseq, i);
        long long phys, ts, sys_flag;
        if (get_ll(res, s_wrote_offset, &phys) < 0) goto error;
        if (phys < 0 || phys <= last_indexed) continue;
        if (get_ll(msg, s_sys_flag, &sys_flag) < 0 || get_ll(res, s_store_ts, &ts) < 0) goto error;
        if ((sys_flag & TRANSACTION_MASK) == TRANSACTION_ROLLBACK) continue;
        PyObject *topic = PyObject_GetAttr(msg, s_topic);
        PyObject *props_obj = topic == NULL ? NULL : PyObject_GetAttr(msg, s_properties_string);
        Py_ssize_t props_len = 0, topic_len = 0, uniq_len = 0, keys_len = 0;
        const unsigned char *props = props_obj == NULL ? NULL
                                   : (const unsigned char *)PyUnicode_AsUTF8AndSize(props_obj, &props_len);
        const unsigned char *topic_utf8 = props == NULL ? NULL
                                        : (const unsigned char *)PyUnicode_AsUTF8AndSize(topic, &topic_len);
        if (topic_utf8 == NULL) {
            Py_XDECREF(topic);
            Py_XDECREF(props_obj);
            goto error;
        }
        const unsigned char *uniq = property_value(props, props_len, UNIQ_KEY_NAME, 8, &uniq_len);
        const unsigned char *keys = property_value(props, props_len, KEYS_NAME, 4, &keys_len);
        if (uniq == NULL) uniq_len = 0;
        Py_ssize_t needed = count_keys(uniq_len, keys, keys_len);
        if (c.count <= 1 || c.count + needed > max_count) {
            Py_DECREF(topic);
            Py_DECREF(props_obj);
            break; /* the Python path starts or rolls the file */
        }
        long long diff = 0;
        if (c.begin_ts > 0) {
            diff = (ts - c.begin_ts) / TIME_DIFF_UNIT_MS; /* negative -> 0 below, so truncation equals floor */
            diff = diff < 0 ? 0 : (diff > INT32_MAX ? INT32_MAX : diff);
        }
        uint32_t topic_hash = hash_utf8(0, topic_utf8, topic_len);
        topic_hash = 31 * topic_hash + '#';
        if (uniq_len > 0) put_key(&c, topic_hash, uniq, uniq_len, phys, (int32_t)diff);
        Py_ssize_t pos = 0, word_len;
        const unsigned char *word;
        while ((word = next_key_word(keys, keys_len, &pos, &word_len)) != NULL)
            put_key(&c, topic_hash, word, word_len, phys, (int32_t)diff);
        Py_DECREF(topic);
        Py_DECREF(props_obj);
        if (needed > 0) {
            last_phys = phys;
            last_ts = ts;
        }
        last_indexed = phys;
    }
    PyBuffer_Release(&view);
    Py_DECREF(mseq);
    Py_DECREF(rseq);
    return Py_BuildValue("(nLLLLL)", i, c.count, c.new_slots, last_phys, last_ts, last_indexed);
error:
    PyBuffer_Release(&view);
    Py_DECREF(mseq);
    Py_DECREF(rseq);
    return NULL;
}

static PyMethodDef methods[] = {
    {"append_records", append_records, METH_VARARGS, append_records_doc},
    {"index_messages", index_messages, METH_VARARGS, index_messages_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "mq_broker.store._native",
    "The CommitLog's batch append loop and the index entries of a batch in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *zlib = PyImport_ImportModule("zlib");
    if (zlib == NULL) return NULL;
    crc32_func = PyObject_GetAttrString(zlib, "crc32");
    Py_DECREF(zlib);
    if (crc32_func == NULL) return NULL;
#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL;
    INTERN(s_topic, "topic")
    INTERN(s_queue_id, "queue_id")
    INTERN(s_body, "body")
    INTERN(s_properties_string, "properties_string")
    INTERN(s_flag, "flag")
    INTERN(s_sys_flag, "sys_flag")
    INTERN(s_born_ts, "born_timestamp_ms")
    INTERN(s_born_host, "born_host")
    INTERN(s_reconsume_times, "reconsume_times")
    INTERN(s_tags_code, "tags_code")
    INTERN(s_wrote_offset, "wrote_offset")
    INTERN(s_store_ts, "store_timestamp_ms")
#undef INTERN
    return PyModule_Create(&module);
}
