package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/strandlog/strand/clientlib"
)

// formatPart is a literal or one record field of --format.
type formatPart struct {
	literal string
	field   byte   // 0: literal; 'J': the whole record as kcat's -J envelope
	null    string // what a null key, value or header value prints as (-Z: "NULL")
}

// formatFields are the %-fields --format knows.
const formatFields = "kvsKShpotT"

// formatHelp is --format's flag help.
const formatHelp = `output per record: %k key, %v (or %s) value, %K key bytes, %S value bytes, %h headers (k=v,k2=v2), ` +
	`%p partition, %o offset, %t topic, %T timestamp (Unix ms), %% and \n \t \r \\ (kcat's fields); "json" is kcat's -J envelope`

// parseFormat compiles --format: %k %v %s %K %S %h %p %o %t (topic) %T
// (timestamp, Unix ms), as kcat's -f, %% and \n \t \r \\, or "json", one
// JSON object per line. null is what a null key,
// value or header value prints as.
func parseFormat(s, null string) ([]formatPart, error) {
	if s == "json" {
		return []formatPart{{field: 'J'}, {literal: "\n"}}, nil
	}
	var parts []formatPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, formatPart{literal: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if (ch != '%' && ch != '\\') || i+1 == len(s) {
			lit.WriteByte(ch)
			continue
		}
		i++
		next := s[i]
		switch {
		case ch == '\\':
			lit.WriteString(unescape(next))
		case next == '%':
			lit.WriteByte('%')
		case strings.IndexByte(formatFields, next) >= 0:
			flush()
			parts = append(parts, formatPart{field: next, null: null})
		default:
			return nil, usageError("--format: unknown %%%c (want %%k %%v %%s %%K %%S %%h %%p %%o %%t %%T %%%%, or json)", next)
		}
	}
	flush()
	return parts, nil
}

// unescape is the text of a backslash escape \c in --format; an unknown
// one stays as written.
func unescape(c byte) string {
	switch c {
	case 'n':
		return "\n"
	case 't':
		return "\t"
	case 'r':
		return "\r"
	case '\\':
		return "\\"
	}
	return "\\" + string(c)
}

// writeRecord prints one record in the compiled format.
func writeRecord(w *bufio.Writer, format []formatPart, r *clientlib.Record) {
	for _, p := range format {
		switch p.field {
		case 0:
			w.WriteString(p.literal)
		case 'k':
			writeNullable(w, r.Key, p.null)
		case 'v', 's':
			writeNullable(w, r.Value, p.null)
		case 'K':
			w.WriteString(strconv.Itoa(len(r.Key)))
		case 'S':
			w.WriteString(strconv.Itoa(len(r.Value)))
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					w.WriteByte(',')
				}
				w.WriteString(h.Key)
				w.WriteByte('=')
				writeNullable(w, h.Value, p.null)
			}
		case 'p':
			w.WriteString(strconv.FormatInt(int64(r.Partition), 10))
		case 'o':
			w.WriteString(strconv.FormatInt(r.Offset, 10))
		case 't':
			w.WriteString(r.Topic)
		case 'T':
			w.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
		case 'J':
			writeRecordJSON(w, r)
		}
	}
}

// writeNullable writes b, or null when b is nil.
func writeNullable(w *bufio.Writer, b []byte, null string) {
	if b == nil {
		w.WriteString(null)
		return
	}
	w.Write(b)
}

// writeRecordJSON writes r as kcat -J does: {"topic", "partition", "offset",
// "tstype", "ts" (Unix ms), "headers" (name, value, name, value...),
// "key", "payload"}, null for a null key, payload or header value. A key
// or payload that is not UTF-8 is base64 with "key_encoding" or
// "payload_encoding": "base64" beside it, so no byte is lost.
func writeRecordJSON(w *bufio.Writer, r *clientlib.Record) {
	w.WriteString(`{"topic":`)
	writeJSONString(w, r.Topic)
	w.WriteString(`,"partition":` + strconv.FormatInt(int64(r.Partition), 10))
	w.WriteString(`,"offset":` + strconv.FormatInt(r.Offset, 10))
	w.WriteString(`,"tstype":"create","ts":` + strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
	w.WriteString(`,"headers":[`)
	for i, h := range r.Headers {
		if i > 0 {
			w.WriteByte(',')
		}
		writeJSONString(w, h.Key)
		w.WriteByte(',')
		writeJSONBytes(w, h.Value)
	}
	w.WriteString(`],"key":`)
	if !writeJSONBytes(w, r.Key) {
		w.WriteString(`,"key_encoding":"base64"`)
	}
	w.WriteString(`,"payload":`)
	if !writeJSONBytes(w, r.Value) {
		w.WriteString(`,"payload_encoding":"base64"`)
	}
	w.WriteByte('}')
}

// writeJSONBytes writes b as a JSON string (null when nil), or as base64
// when it is not UTF-8, and says whether it wrote it as text.
func writeJSONBytes(w *bufio.Writer, b []byte) bool {
	switch {
	case b == nil:
		w.WriteString("null")
	case utf8.Valid(b):
		writeJSONString(w, string(b))
	default:
		w.WriteString(`"` + base64.StdEncoding.EncodeToString(b) + `"`)
		return false
	}
	return true
}

// writeJSONString writes s quoted as JSON (without escaping <, > and &).
func writeJSONString(w *bufio.Writer, s string) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	w.WriteString(strings.TrimSuffix(b.String(), "\n"))
}
