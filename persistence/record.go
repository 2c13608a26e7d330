package persistence

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unsafe"
)

// Size limits for records. Append rejects records beyond them with
// ErrInvalidRecord and DecodeRecord rejects encodings beyond them with
// ErrCorruptRecord, so a damaged length field can never make the decoder
// allocate more than its input size.
const (
	MaxBucketNameSize = 255      // bytes in an entity bucket name
	MaxKeySize        = 32 << 10 // bytes in a key (bbolt's own limit)
	MaxValueSize      = 16 << 20 // bytes in a value
	MaxOps            = 1 << 16  // ops in one record
	MaxRecordSize     = 64 << 20 // bytes in one encoded record
)

// Reserved bucket names: they hold the store's own data.
const (
	journalBucket = "journal"
	metaBucket    = "meta"
)

// Op is one change to the materialized state.
type Op struct {
	Bucket string // entity bucket name, created on first use; must not be "journal" or "meta"
	Key    []byte // must not be empty
	Value  []byte // ignored when Delete
	Delete bool
}

// Put returns an op that stores value under key in bucket.
func Put(bucket string, key, value []byte) Op {
	return Op{Bucket: bucket, Key: key, Value: value}
}

// Del returns an op that removes key from bucket (a no-op when absent).
func Del(bucket string, key []byte) Op {
	return Op{Bucket: bucket, Key: key, Delete: true}
}

// Record is the unit of durability: its ops become durable and visible
// together, or not at all.
type Record struct{ Ops []Op }

// Wire format of a record (all integers are unsigned varints in their
// shortest form unless noted):
//
//	version   1 byte  (recordVersion)
//	count     number of ops
//	per op:   kind 1 byte (opPut or opDelete)
//	          len + bucket name bytes
//	          len + key bytes
//	          len + value bytes     (opPut only)
//	crc       4 bytes big-endian CRC-32C of everything before it
//
// Shortest-form varints make the encoding canonical: any input that
// DecodeRecord accepts re-encodes to the same bytes.
const (
	recordVersion = 1
	opPut         = 1
	opDelete      = 2
	crcSize       = 4
	// minOpSize is the smallest possible encoded op (a delete with one-byte
	// bucket and key); it bounds the op count a given input can claim.
	minOpSize = 5
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// validateOp reports why op can never be stored.
func validateOp(op Op) error {
	switch {
	case op.Bucket == "":
		return fmt.Errorf("empty bucket name")
	case op.Bucket == journalBucket || op.Bucket == metaBucket:
		return fmt.Errorf("bucket name %q is reserved", op.Bucket)
	case len(op.Bucket) > MaxBucketNameSize:
		return fmt.Errorf("bucket name of %d bytes exceeds %d", len(op.Bucket), MaxBucketNameSize)
	case len(op.Key) == 0:
		return fmt.Errorf("empty key in bucket %q", op.Bucket)
	case len(op.Key) > MaxKeySize:
		return fmt.Errorf("key of %d bytes exceeds %d", len(op.Key), MaxKeySize)
	case !op.Delete && len(op.Value) > MaxValueSize:
		return fmt.Errorf("value of %d bytes exceeds %d", len(op.Value), MaxValueSize)
	}
	return nil
}

// validateRecord checks every op and the total encoded size, returning the
// encoded size when the record is acceptable.
func validateRecord(r Record) (int, error) {
	if len(r.Ops) > MaxOps {
		return 0, fmt.Errorf("%w: %d ops exceed %d", ErrInvalidRecord, len(r.Ops), MaxOps)
	}
	for i, op := range r.Ops {
		if err := validateOp(op); err != nil {
			return 0, fmt.Errorf("%w: op %d: %v", ErrInvalidRecord, i, err)
		}
	}
	n := encodedSize(r)
	if n > MaxRecordSize {
		return 0, fmt.Errorf("%w: encoded size %d exceeds %d", ErrInvalidRecord, n, MaxRecordSize)
	}
	return n, nil
}

func encodedSize(r Record) int {
	n := 1 + uvarintSize(uint64(len(r.Ops))) + crcSize
	for _, op := range r.Ops {
		n += 1 + uvarintSize(uint64(len(op.Bucket))) + len(op.Bucket) +
			uvarintSize(uint64(len(op.Key))) + len(op.Key)
		if !op.Delete {
			n += uvarintSize(uint64(len(op.Value))) + len(op.Value)
		}
	}
	return n
}

func uvarintSize(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// EncodeRecord returns the wire form of r. It does not validate r; Append
// does. The result never aliases r.
func EncodeRecord(r Record) []byte {
	return encode(r, encodedSize(r))
}

// encode encodes r into a buffer of exactly size bytes. The store keeps that
// buffer, never modified once built, as the record's only copy: the journal
// writes it, and the overlay's keys and values alias it (see opReader), so
// the caller may reuse its own slices as soon as Append returns.
func encode(r Record, size int) []byte {
	b := make([]byte, 0, size)
	b = append(b, recordVersion)
	b = binary.AppendUvarint(b, uint64(len(r.Ops)))
	for _, op := range r.Ops {
		if op.Delete {
			b = append(b, opDelete)
		} else {
			b = append(b, opPut)
		}
		b = binary.AppendUvarint(b, uint64(len(op.Bucket)))
		b = append(b, op.Bucket...)
		b = binary.AppendUvarint(b, uint64(len(op.Key)))
		b = append(b, op.Key...)
		if !op.Delete {
			b = binary.AppendUvarint(b, uint64(len(op.Value)))
			b = append(b, op.Value...)
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// opReader walks the ops of a record encoding that is known to be valid:
// built by encode, or accepted by DecodeRecord. Bucket names, keys and
// values alias the encoding, which must never change afterwards (so that
// strings over it are as immutable as Go strings).
type opReader struct {
	b    []byte // the ops not read yet
	left int
}

func readOps(enc []byte) opReader {
	n, w := binary.Uvarint(enc[1:])
	return opReader{b: enc[1+w : len(enc)-crcSize], left: int(n)}
}

// next returns the next op; ok is false after the last one. val is nil for
// a delete and never nil for a put.
func (r *opReader) next() (bucket, key string, val []byte, del, ok bool) {
	if r.left == 0 {
		return "", "", nil, false, false
	}
	r.left--
	del = r.b[0] == opDelete
	r.b = r.b[1:]
	bucket = unsafeString(r.field())
	key = unsafeString(r.field())
	if !del {
		val = r.field()
	}
	return bucket, key, val, del, true
}

// field reads a length-prefixed byte string, capacity clipped.
func (r *opReader) field() []byte {
	n, w := binary.Uvarint(r.b)
	end := w + int(n)
	f := r.b[w:end:end]
	r.b = r.b[end:]
	return f
}

// unsafeString views b as a string without copying. Only for bytes that
// never change afterwards.
func unsafeString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// DecodeRecord parses the wire form produced by EncodeRecord. Malformed input
// (bad checksum, unknown version or op kind, truncated or oversized fields,
// trailing bytes, non-canonical varints, ops that Append would reject) yields
// an error wrapping ErrCorruptRecord. The result does not alias b. Allocation
// is bounded by a small multiple of len(b).
func DecodeRecord(b []byte) (Record, error) {
	if len(b) > MaxRecordSize {
		return Record{}, corrupt("record of %d bytes exceeds %d", len(b), MaxRecordSize)
	}
	if len(b) < 1+1+crcSize {
		return Record{}, corrupt("record of %d bytes is too short", len(b))
	}
	body := b[:len(b)-crcSize]
	if want, got := binary.BigEndian.Uint32(b[len(body):]), crc32.Checksum(body, castagnoli); want != got {
		return Record{}, corrupt("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	if body[0] != recordVersion {
		return Record{}, corrupt("unknown version %d", body[0])
	}
	// One copy of the body backs every key and value of the result.
	d := decoder{buf: append([]byte(nil), body...), pos: 1}
	count, err := d.uvarint()
	if err != nil {
		return Record{}, err
	}
	if count > MaxOps || count > uint64(d.remaining()/minOpSize) {
		return Record{}, corrupt("op count %d impossible for %d remaining bytes", count, d.remaining())
	}
	r := Record{Ops: make([]Op, 0, int(count))}
	for i := range int(count) {
		kind, err := d.readByte()
		if err != nil {
			return Record{}, err
		}
		if kind != opPut && kind != opDelete {
			return Record{}, corrupt("op %d: unknown kind %d", i, kind)
		}
		bucket, err := d.field(MaxBucketNameSize)
		if err != nil {
			return Record{}, err
		}
		op := Op{Bucket: string(bucket), Delete: kind == opDelete}
		if op.Key, err = d.field(MaxKeySize); err != nil {
			return Record{}, err
		}
		if !op.Delete {
			if op.Value, err = d.field(MaxValueSize); err != nil {
				return Record{}, err
			}
		}
		if err := validateOp(op); err != nil {
			return Record{}, corrupt("op %d: %v", i, err)
		}
		r.Ops = append(r.Ops, op)
	}
	if d.remaining() != 0 {
		return Record{}, corrupt("%d trailing bytes", d.remaining())
	}
	return r, nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorruptRecord}, args...)...)
}

// decoder reads fields from buf, failing rather than reading past its end.
type decoder struct {
	buf []byte
	pos int
}

func (d *decoder) remaining() int { return len(d.buf) - d.pos }

func (d *decoder) readByte() (byte, error) {
	if d.pos >= len(d.buf) {
		return 0, corrupt("truncated at offset %d", d.pos)
	}
	c := d.buf[d.pos]
	d.pos++
	return c, nil
}

func (d *decoder) uvarint() (uint64, error) {
	v, n := binary.Uvarint(d.buf[d.pos:])
	if n <= 0 {
		return 0, corrupt("bad varint at offset %d", d.pos)
	}
	if n != uvarintSize(v) {
		return 0, corrupt("non-canonical varint at offset %d", d.pos)
	}
	d.pos += n
	return v, nil
}

// field reads a length-prefixed byte string of at most limit bytes. The
// result aliases d.buf with its capacity clipped, so appending to it can
// never overwrite a neighbouring field.
func (d *decoder) field(limit int) ([]byte, error) {
	at := d.pos
	n, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	if n > uint64(limit) || n > uint64(d.remaining()) {
		return nil, corrupt("field length %d at offset %d exceeds limit or input", n, at)
	}
	end := d.pos + int(n)
	f := d.buf[d.pos:end:end]
	d.pos = end
	return f, nil
}
