/*
 * mq_broker.store._native.reput_records: a slave's dispatch of replicated CommitLog bytes, in C.
 *
 * Mirrors org.apache.rocketmq.store.DefaultMessageStore.ReputMessageService#doReput with
 * CommitLogDispatcherBuildConsumeQueue: walks the whole v1 records of one mapped CommitLog file and gathers the
 * 20-byte ConsumeQueue units of each topic-queue, so Python writes each queue's units with one call instead of
 * parsing every record. The checks are the Python path's (commit_log.parse_dispatch without the body CRC, as
 * ReputMessageService): a record whose fields do not add up, or whose topic or properties are not UTF-8, is
 * corrupt. mq_broker/store/reput.py holds the Python twin; a test compares both on the same bytes.
 *
 * Runs on the event loop thread with the GIL held (the mapped file must not change under it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_native.h"

#define CQ_UNIT_BYTES 20
#define MAX_QUEUES 256 /* topic-queues gathered per call; a call stops before the next new one */
#define QUEUE_SLOTS 512
#define FIRST_CAPACITY 256

typedef struct {
    const unsigned char *topic; /* into the log buffer */
    Py_ssize_t topic_len, units;
    int32_t queue_id;
    int64_t first_offset, next_offset;
} Queue;

typedef struct {
    Queue queues[MAX_QUEUES];
    int count;
    int16_t slots[QUEUE_SLOTS]; /* queue index + 1; 0: empty */
} QueueTable;

/* The queue of (topic, queue id): its index, or -1 when the table is full. */
static int queue_index(QueueTable *t, const unsigned char *topic, Py_ssize_t topic_len, int32_t queue_id) {
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < topic_len; i++) h = (h ^ topic[i]) * 16777619u;
    h ^= (uint32_t)queue_id * 0x9E3779B1u;
    uint32_t slot = h % QUEUE_SLOTS;
    while (t->slots[slot] != 0) {
        Queue *q = &t->queues[t->slots[slot] - 1];
        if (q->queue_id == queue_id && q->topic_len == topic_len && memcmp(q->topic, topic, (size_t)topic_len) == 0)
            return t->slots[slot] - 1;
        slot = (slot + 1) % QUEUE_SLOTS;
    }
    if (t->count == MAX_QUEUES) return -1;
    Queue *q = &t->queues[t->count];
    memset(q, 0, sizeof(*q));
    q->topic = topic;
    q->topic_len = topic_len;
    q->queue_id = queue_id;
    t->slots[slot] = (int16_t)(++t->count);
    return t->count - 1;
}

/* 1 when s[0:n] is well-formed UTF-8 (what Python's strict decoder accepts), else 0. */
static int utf8_valid(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i], lo = 0x80, hi = 0xBF;
        Py_ssize_t more;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) more = 1;
        else if (c == 0xE0) more = 2, lo = 0xA0;
        else if (c == 0xED) more = 2, hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF) more = 2;
        else if (c == 0xF0) more = 3, lo = 0x90;
        else if (c == 0xF4) more = 3, hi = 0x8F;
        else if (c >= 0xF1 && c <= 0xF3) more = 3;
        else return 0;
        if (n - i - 1 < more || s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (Py_ssize_t k = 2; k <= more; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += more + 1;
    }
    return 1;
}

/* Tag code of the last TAGS of a ``k\x01v\x02`` property text (commit_log.last_property_value); 0: none. */
static int64_t tags_code(const unsigned char *props, Py_ssize_t len) {
    static const char needle[] = "TAGS\x01";
    for (Py_ssize_t j = len - 5; j >= 0; j--) {
        if (memcmp(props + j, needle, 5) != 0 || (j > 0 && props[j - 1] != 2)) continue;
        const unsigned char *value = props + j + 5, *end = memchr(value, 2, (size_t)(len - j - 5));
        Py_ssize_t value_len = end == NULL ? len - j - 5 : end - value;
        return value_len == 0 ? 0 : (int64_t)(int32_t)hash_utf8(0, value, value_len);
    }
    return 0;
}

typedef struct {
    int32_t queue_id, sys_flag;
    int64_t queue_offset, store_ts, tags_code;
    const unsigned char *topic;
    Py_ssize_t topic_len;
} Record;

/* 0 when r[0:total] is a whole v1 record stored at ``phys`` (total >= MIN_RECORD_BYTES), else -1. */
static int parse_record(const unsigned char *r, Py_ssize_t total, int64_t phys, Record *out) {
    if ((int64_t)get_u64(r + PHYSICAL_OFFSET_OFFSET) != phys) return -1;
    out->queue_id = (int32_t)get_u32(r + QUEUE_ID_OFFSET);
    out->queue_offset = (int64_t)get_u64(r + QUEUE_OFFSET_OFFSET);
    out->sys_flag = (int32_t)get_u32(r + SYS_FLAG_OFFSET);
    Py_ssize_t born_len = BORN_HOST_LENGTH(out->sys_flag), store_len = STORE_HOST_LENGTH(out->sys_flag);
    Py_ssize_t p = STORE_TIMESTAMP_AT(born_len);
    if (p + STORE_TIMESTAMP_BYTES > total) return -1;
    out->store_ts = (int64_t)get_u64(r + p);
    p = BODY_LENGTH_AT(born_len, store_len);
    if (p + BODY_LENGTH_BYTES > total) return -1;
    int64_t body_len = (int32_t)get_u32(r + p);
    p += BODY_LENGTH_BYTES;
    if (body_len < 0 || p + body_len >= total) return -1; /* the TOPICLEN byte must follow */
    p += (Py_ssize_t)body_len;
    out->topic_len = r[p];
    out->topic = r + p + TOPIC_LENGTH_BYTES;
    p += TOPIC_LENGTH_BYTES + out->topic_len;
    if (p + PROPERTIES_LENGTH_BYTES > total) return -1;
    Py_ssize_t props_len = ((Py_ssize_t)r[p] << 8) | r[p + 1];
    const unsigned char *props = r + p + PROPERTIES_LENGTH_BYTES;
    if (p + PROPERTIES_LENGTH_BYTES + props_len != total || !utf8_valid(out->topic, out->topic_len) ||
        !utf8_valid(props, props_len))
        return -1;
    out->tags_code = tags_code(props, props_len);
    return 0;
}

/* Units in record order with the queue each belongs to; grows by doubling. */
typedef struct {
    unsigned char *units;
    uint16_t *owner;
    Py_ssize_t count, capacity;
} Units;

static int units_add(Units *u, int owner, int64_t phys, Py_ssize_t size, int64_t tags) {
    if (u->count == u->capacity) {
        Py_ssize_t capacity = u->capacity ? 2 * u->capacity : FIRST_CAPACITY;
        unsigned char *units = PyMem_Realloc(u->units, (size_t)capacity * CQ_UNIT_BYTES);
        if (units == NULL) return -1;
        u->units = units;
        uint16_t *owners = PyMem_Realloc(u->owner, (size_t)capacity * sizeof(uint16_t));
        if (owners == NULL) return -1;
        u->owner = owners;
        u->capacity = capacity;
    }
    unsigned char *unit = u->units + u->count * CQ_UNIT_BYTES;
    put_u64(unit, (uint64_t)phys);
    put_u32(unit + 8, (uint32_t)size);
    put_u64(unit + 12, (uint64_t)tags);
    u->owner[u->count++] = (uint16_t)owner;
    return 0;
}

/* [(topic, queue id, first queue offset, units bytes)] of the gathered queues, in order of first appearance. */
static PyObject *queue_list(const QueueTable *t, const Units *u) {
    PyObject *list = PyList_New(t->count);
    char *dst[MAX_QUEUES];
    if (list == NULL) return NULL;
    for (int i = 0; i < t->count; i++) {
        const Queue *q = &t->queues[i];
        PyObject *units = PyBytes_FromStringAndSize(NULL, q->units * CQ_UNIT_BYTES);
        PyObject *item = units == NULL ? NULL
                                       : Py_BuildValue("(NiLO)", PyUnicode_DecodeUTF8((const char *)q->topic,
                                                                                       q->topic_len, "strict"),
                                                       (int)q->queue_id, (long long)q->first_offset, units);
        if (item == NULL) {
            Py_XDECREF(units);
            Py_DECREF(list);
            return NULL;
        }
        dst[i] = PyBytes_AS_STRING(units);
        Py_DECREF(units);
        PyList_SET_ITEM(list, i, item);
    }
    for (Py_ssize_t k = 0; k < u->count; k++) {
        memcpy(dst[u->owner[k]], u->units + k * CQ_UNIT_BYTES, CQ_UNIT_BYTES);
        dst[u->owner[k]] += CQ_UNIT_BYTES;
    }
    return list;
}

/* Where a record starts at ``pos``: 1 to dispatch, 0 to stop before it (END_OF_FILE blank, a record not fully
 * written yet, fewer than 8 bytes written), -1 for bytes that are no record. */
static int record_at(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t written, Py_ssize_t file_size) {
    if (written - pos < END_FILE_MIN_BLANK_LENGTH) return 0;
    int64_t total = (int32_t)get_u32(buf + pos + TOTAL_SIZE_OFFSET);
    uint32_t magic = get_u32(buf + pos + MAGIC_CODE_OFFSET);
    if (magic == BLANK_MAGIC_CODE && total == file_size - pos) return 0;
    if (magic != MESSAGE_MAGIC_CODE || total < MIN_RECORD_BYTES) return -1;
    if (pos + total > written) return total > file_size - pos ? -1 : 0;
    return 1;
}

const char reput_records_doc[] =
    "reput_records(log_buf, start, written, limit, file_size, file_from_offset)\n"
    "    -> (stop, records, last_store_timestamp_ms, corrupt, queues)\n"
    "\n"
    "Walk the v1 records of one CommitLog file (``log_buf``, ``file_size`` bytes at CommitLog offset\n"
    "``file_from_offset``, written up to ``written``) from ``start`` while a record starts before ``limit``. Stops\n"
    "before an END_OF_FILE blank, a record not fully written, a record whose queue offset does not follow the\n"
    "last one of its topic-queue in this call, or a 257th topic-queue; ``corrupt`` is True when it stopped at bytes\n"
    "that are no valid record at their offset. ``records`` counts the records walked (``last_store_timestamp_ms``\n"
    "is the last one's); ``queues`` holds (topic, queue id, first queue offset, ConsumeQueue units: 20 bytes each,\n"
    "commit log offset i64, size i32, tags code i64) for the dispatchable records (not prepared or rolled-back\n"
    "transactions), in order of the queues' first record. Raises ValueError for a range outside the buffer.";

PyObject *reput_records(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer log;
    Py_ssize_t pos, written, limit, file_size;
    long long file_from;
    if (!PyArg_ParseTuple(args, "y*nnnnL", &log, &pos, &written, &limit, &file_size, &file_from)) return NULL;
    PyObject *result = NULL;
    Units units = {0};
    QueueTable *table = PyMem_Calloc(1, sizeof(QueueTable));
    if (table == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (pos < 0 || written < pos || file_size < written || file_size > log.len) {
        PyErr_SetString(PyExc_ValueError, "the range passes the commit log file");
        goto done;
    }
    const unsigned char *buf = log.buf;
    Py_ssize_t records = 0;
    long long last_ts = 0;
    int corrupt = 0;
    while (pos < limit) {
        int at = record_at(buf, pos, written, file_size);
        if (at == 0) break;
        Record r;
        Py_ssize_t total = (Py_ssize_t)get_u32(buf + pos + TOTAL_SIZE_OFFSET);
        if (at < 0 || parse_record(buf + pos, total, file_from + pos, &r) < 0) {
            corrupt = 1;
            break;
        }
        int tran = r.sys_flag & TRANSACTION_MASK;
        if (tran != TRANSACTION_PREPARED && tran != TRANSACTION_ROLLBACK) {
            int i = queue_index(table, r.topic, r.topic_len, r.queue_id);
            Queue *q = i < 0 ? NULL : &table->queues[i];
            if (q == NULL || (q->units > 0 && r.queue_offset != q->next_offset)) break;
            if (units_add(&units, i, file_from + pos, total, r.tags_code) < 0) {
                PyErr_NoMemory();
                goto done;
            }
            if (q->units == 0) q->first_offset = r.queue_offset;
            q->next_offset = r.queue_offset + 1;
            q->units++;
        }
        records++;
        last_ts = (long long)r.store_ts;
        pos += total;
    }
    PyObject *queues = queue_list(table, &units);
    if (queues != NULL) result = Py_BuildValue("(nnLNN)", pos, records, last_ts, PyBool_FromLong(corrupt), queues);
done:
    PyMem_Free(table);
    PyMem_Free(units.units);
    PyMem_Free(units.owner);
    PyBuffer_Release(&log);
    return result;
}
