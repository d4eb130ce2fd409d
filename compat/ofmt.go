package compat

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// Field is one column of an ofmt template: its name (the header) and width. The
// width includes the separating blank.
type Field struct {
	Name  string
	Width int
}

// OfmtFlags select the output mode (libofmt OFMT_*).
type OfmtFlags int

// Output modes.
const (
	// OfmtParsable is -p: no header, ':'-separated fields, empty values printed empty.
	OfmtParsable OfmtFlags = 1 << iota
	// OfmtMultiline is show-rule -f: one "NAME: value" line per field.
	OfmtMultiline
	// OfmtRightJust right-justifies values in human mode (unused by ilbadm).
	OfmtRightJust
)

// Marks printed for empty and undeterminable values (OFMT_VAL_UNDEF, OFMT_VAL_UNKNOWN).
const (
	ValUndef   = "--"
	ValUnknown = "?"
)

// ofmtValueMax is the size of libofmt's value buffer minus its NUL: longer values are cut.
const ofmtValueMax = 1023

// ofmtErrMax is the size of ilbadm's error buffer (char e[80]) minus its NUL.
const ofmtErrMax = 79

// Ofmt prints rows of a table the way libofmt does.
type Ofmt struct {
	w          io.Writer
	fields     []Field
	flags      OfmtFlags
	rows       int // terminal height; the header is repeated every rows rows
	nrow       int
	overflow   int
	maxNameLen int
	buf        bytes.Buffer
	err        error
}

// NewOfmt opens a table on w: list is the comma-separated -o field list (matched
// case-insensitively; "all" is every template field), or "" when -o was not given, in
// which case defaults is used ("" defaults meaning every field). termRows is the
// terminal height; 0 means 24, libofmt's value when stdout is not a terminal.
// Errors are ofmt_open's, prefixed "ofmt_open failed: " and cut to 79 bytes as
// ilbadm's 80-byte buffer does. ilbadm treats every ofmt_open error as fatal, and
// opens the table lazily at the first row, so a bad field list is only reported if
// something is to be printed.
func NewOfmt(w io.Writer, template []Field, list, defaults string, flags OfmtFlags, termRows int) (*Ofmt, *CLIError) {
	if list == "" {
		list = defaults
	}
	if list == "" {
		return openOfmt(w, template, nil, flags, termRows)
	}
	return openOfmt(w, template, &list, flags, termRows)
}

// NewOfmtList is NewOfmt for a list exactly as given with -o, where an empty list is
// an (erroneous) explicit list, not "use the defaults".
func NewOfmtList(w io.Writer, template []Field, list string, flags OfmtFlags, termRows int) (*Ofmt, *CLIError) {
	return openOfmt(w, template, &list, flags, termRows)
}

// openOfmt is ofmt_open; str == nil selects all fields.
func openOfmt(w io.Writer, template []Field, str *string, flags OfmtFlags, termRows int) (*Ofmt, *CLIError) {
	fail := func(msg string) (*Ofmt, *CLIError) {
		if len(msg) > ofmtErrMax {
			msg = msg[:ofmtErrMax]
		}
		return nil, Errorf("ofmt_open failed: %s", msg)
	}
	parsable := flags&OfmtParsable != 0
	multiline := flags&OfmtMultiline != 0
	if parsable {
		if multiline {
			return fail("multiline mode incompatible with parsable mode")
		}
		if str == nil || *str == "" {
			return fail("output fields must be specified in parsable mode")
		}
		if strings.EqualFold(*str, "all") {
			return fail("output field `all' invalid in parsable mode")
		}
	}
	if len(template) == 0 {
		return fail("no template provided for fields")
	}
	var names []string
	switch {
	case str != nil && !strings.EqualFold(*str, "all"):
		if *str == "" {
			// split_str fails on an empty string and ofmt_open reports ENOMEM;
			// Solaris' strerror(ENOMEM) reads "Not enough space".
			return fail("Not enough space")
		}
		// strtok skips empty items.
		for _, n := range strings.Split(*str, ",") {
			if n != "" {
				names = append(names, n)
			}
		}
	default:
		for _, f := range template {
			names = append(names, f.Name)
		}
	}
	o := &Ofmt{w: w, flags: flags, rows: termRows}
	if o.rows <= 0 {
		o.rows = 24
	}
	var bad []string
	for _, n := range names {
		i := fieldIndex(template, n)
		if i < 0 {
			bad = append(bad, n)
			continue
		}
		o.fields = append(o.fields, template[i])
		if multiline {
			o.maxNameLen = max(o.maxNameLen, len(template[i].Name))
		}
	}
	if len(o.fields) == 0 {
		return fail("no valid output fields")
	}
	if len(bad) > 0 {
		var s string
		switch {
		case !parsable && len(bad) > 1:
			s = "ignoring unknown output fields:"
		case !parsable:
			s = "ignoring unknown output field:"
		case len(bad) > 1:
			s = "unknown output fields:"
		default:
			s = "unknown output field:"
		}
		for _, b := range bad {
			s += " `" + b + "'"
		}
		return fail(s)
	}
	return o, nil
}

// fieldIndex finds a field name in the template, case-insensitively.
func fieldIndex(template []Field, name string) int {
	for i, f := range template {
		if strings.EqualFold(f.Name, name) {
			return i
		}
	}
	return -1
}

// Fields returns the selected fields in output order.
func (o *Ofmt) Fields() []Field { return append([]Field(nil), o.fields...) }

// Err returns the first error writing to the output, if any.
func (o *Ofmt) Err() error { return o.err }

// Row prints one row (ofmt_print). value(field) returns the text for a selected
// field (called with the template's field name) and ok=false for "cannot determine",
// printed "?". An empty text prints "--", except in parsable mode where it stays
// empty. In human mode the header is printed before the first row and again whenever
// the row counter (which counts the header) reaches a multiple of the terminal height.
func (o *Ofmt) Row(value func(field string) (string, bool)) {
	if o == nil {
		return
	}
	parsable := o.flags&OfmtParsable != 0
	multiline := o.flags&OfmtMultiline != 0
	o.buf.Reset()

	n := o.nrow
	o.nrow++
	if n%o.rows == 0 && !parsable && !multiline {
		o.header()
		o.nrow++
	}
	if multiline && o.nrow > 1 {
		o.buf.WriteByte('\n')
	}
	for i, f := range o.fields {
		last := i == len(o.fields)-1
		v, ok := "", false
		if value != nil {
			v, ok = value(f.Name)
		}
		switch {
		case !ok:
			v = ValUnknown
		case len(v) > ofmtValueMax:
			v = v[:ofmtValueMax]
		}
		if ok && v == "" && !parsable {
			v = ValUndef
		}
		o.field(f, v, last)
	}
	o.buf.WriteByte('\n')
	o.flush()
}

// header prints the field names as one row.
func (o *Ofmt) header() {
	for i, f := range o.fields {
		o.field(f, f.Name, i == len(o.fields)-1)
	}
	o.buf.WriteByte('\n')
}

// field is ofmt_print_field, including its overflow bookkeeping: a value that does not
// fit is followed by one blank and later fields give up padding to re-align.
func (o *Ofmt) field(f Field, value string, last bool) {
	b := &o.buf
	width := f.Width
	switch {
	case o.flags&OfmtParsable != 0:
		if len(o.fields) == 1 {
			b.WriteString(value)
			return
		}
		// Escaping only happens with several fields (escsep = nfields > 1).
		for i := 0; i < len(value); i++ {
			if c := value[i]; c == ':' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(value[i])
		}
		if !last {
			b.WriteByte(':')
		}
	case o.flags&OfmtMultiline != 0:
		if value == "" {
			value = ValUndef
		}
		name := f.Name
		if len(name) > o.maxNameLen {
			name = name[:o.maxNameLen]
		}
		fmt.Fprintf(b, "%*s: %s", o.maxNameLen, name, value)
		if !last {
			b.WriteByte('\n')
		}
	default:
		right := o.flags&OfmtRightJust != 0
		if last {
			if right {
				fmt.Fprintf(b, "%*s", width, value)
			} else {
				b.WriteString(value)
			}
			o.overflow = 0
			return
		}
		vw := len(value)
		if vw+o.overflow >= width {
			o.overflow += vw - width + 1
			if right {
				fmt.Fprintf(b, "%*s ", width, value)
			} else {
				b.WriteString(value)
				b.WriteByte(' ')
			}
			return
		}
		if o.overflow > 0 {
			c := min(o.overflow, width-vw)
			o.overflow -= c
			width -= c
		}
		if right {
			fmt.Fprintf(b, "%*s ", width, value)
		} else {
			fmt.Fprintf(b, "%-*s", width, value)
		}
	}
}

// flush writes the buffered row; the first write error is kept for Err.
func (o *Ofmt) flush() {
	if o.w == nil || o.buf.Len() == 0 {
		return
	}
	if _, err := o.w.Write(o.buf.Bytes()); err != nil && o.err == nil {
		o.err = err
	}
}
