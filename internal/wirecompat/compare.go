package wirecompat

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Kind classifies a Diff.
type Kind string

// Diff kinds. The "missing-" kinds mean an element of theirs has no
// counterpart in ours; the others mean the counterpart exists but differs.
const (
	MissingFile      Kind = "missing-file"
	FilePackage      Kind = "file-package"
	FileSyntax       Kind = "file-syntax"
	DeclaredInFile   Kind = "declared-in-file"
	MissingMessage   Kind = "missing-message"
	MessageMapEntry  Kind = "message-map-entry"
	MissingField     Kind = "missing-field"
	FieldNumber      Kind = "field-number"
	FieldKind        Kind = "field-kind"
	FieldType        Kind = "field-type"
	FieldCardinality Kind = "field-cardinality"
	FieldOneof       Kind = "field-oneof"
	FieldOptional    Kind = "field-optional"
	FieldJSONName    Kind = "field-json-name"
	FieldPacked      Kind = "field-packed"
	FieldDefault     Kind = "field-default"
	MissingOneof     Kind = "missing-oneof"
	MissingEnum      Kind = "missing-enum"
	EnumClosed       Kind = "enum-closed"
	MissingEnumValue Kind = "missing-enum-value"
	EnumValueNumber  Kind = "enum-value-number"
	MissingService   Kind = "missing-service"
	MissingMethod    Kind = "missing-method"
	MethodInput      Kind = "method-input"
	MethodOutput     Kind = "method-output"
	MethodStreaming  Kind = "method-streaming"
)

// Diff is one element of theirs that ours lacks or shapes differently.
type Diff struct {
	Kind Kind `json:"kind"`
	// Element is the full name of the element of theirs (a file path for
	// file-level kinds).
	Element string `json:"element"`
	// Detail says what differs: "ours X, theirs Y".
	Detail string `json:"detail,omitempty"`
}

func (d Diff) String() string {
	if d.Detail == "" {
		return fmt.Sprintf("%s %s", d.Kind, d.Element)
	}
	return fmt.Sprintf("%s %s: %s", d.Kind, d.Element, d.Detail)
}

// Counts says how many elements of theirs were checked.
type Counts struct {
	Files      int `json:"files"`
	Messages   int `json:"messages"`
	Fields     int `json:"fields"`
	Oneofs     int `json:"oneofs"`
	Enums      int `json:"enums"`
	EnumValues int `json:"enum_values"`
	Services   int `json:"services"`
	Methods    int `json:"methods"`
}

// Report is the result of Compare.
type Report struct {
	Checked Counts `json:"checked"`
	// Methods lists the full names of every method of theirs that was
	// checked, sorted, so callers can assert the checked set is complete.
	Methods []string `json:"methods"`
	// Diffs is empty when ours covers theirs exactly.
	Diffs []Diff `json:"diffs"`
}

// Compare reports every element of theirs that is missing from ours or has a
// different shape there. Elements ours has in addition are not reported (see
// Additions). Diffs are sorted by element, then kind.
func Compare(ours, theirs []protoreflect.FileDescriptor) Report {
	c := &comparer{ours: index(ours)}
	for _, f := range theirs {
		c.file(f)
	}
	sort.Slice(c.rep.Diffs, func(i, j int) bool {
		a, b := c.rep.Diffs[i], c.rep.Diffs[j]
		if a.Element != b.Element {
			return a.Element < b.Element
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Detail < b.Detail
	})
	sort.Strings(c.rep.Methods)
	if c.rep.Diffs == nil {
		c.rep.Diffs = []Diff{}
	}
	return c.rep
}

// Additions lists elements (files, messages, fields, oneofs, enums, enum
// values, services, methods) that ours declares and theirs does not, as
// "kind name" strings, sorted. It is informational: additions are allowed.
func Additions(ours, theirs []protoreflect.FileDescriptor) []string {
	rev := Compare(theirs, ours)
	var out []string
	for _, d := range rev.Diffs {
		switch d.Kind {
		case MissingFile, MissingMessage, MissingField, MissingOneof,
			MissingEnum, MissingEnumValue, MissingService, MissingMethod:
			out = append(out, string(d.Kind[len("missing-"):])+" "+d.Element)
		}
	}
	sort.Strings(out)
	return out
}

// set is ours, indexed for lookups by path and full name.
type set struct {
	files map[string]protoreflect.FileDescriptor
	names map[protoreflect.FullName]protoreflect.Descriptor
}

func index(files []protoreflect.FileDescriptor) *set {
	s := &set{
		files: make(map[string]protoreflect.FileDescriptor),
		names: make(map[protoreflect.FullName]protoreflect.Descriptor),
	}
	var walkMsgs func(protoreflect.MessageDescriptors)
	walkEnums := func(es protoreflect.EnumDescriptors) {
		for i := 0; i < es.Len(); i++ {
			s.names[es.Get(i).FullName()] = es.Get(i)
		}
	}
	walkMsgs = func(ms protoreflect.MessageDescriptors) {
		for i := 0; i < ms.Len(); i++ {
			m := ms.Get(i)
			s.names[m.FullName()] = m
			walkEnums(m.Enums())
			walkMsgs(m.Messages())
		}
	}
	for _, f := range files {
		s.files[f.Path()] = f
		walkMsgs(f.Messages())
		walkEnums(f.Enums())
		for i := 0; i < f.Services().Len(); i++ {
			s.names[f.Services().Get(i).FullName()] = f.Services().Get(i)
		}
	}
	return s
}

type comparer struct {
	ours *set
	rep  Report
}

func (c *comparer) add(k Kind, elem any, format string, args ...any) {
	c.rep.Diffs = append(c.rep.Diffs, Diff{Kind: k, Element: fmt.Sprint(elem), Detail: fmt.Sprintf(format, args...)})
}

func (c *comparer) file(t protoreflect.FileDescriptor) {
	c.rep.Checked.Files++
	if o, ok := c.ours.files[t.Path()]; !ok {
		c.add(MissingFile, t.Path(), "")
	} else {
		if o.Package() != t.Package() {
			c.add(FilePackage, t.Path(), "ours %q, theirs %q", o.Package(), t.Package())
		}
		if o.Syntax() != t.Syntax() {
			c.add(FileSyntax, t.Path(), "ours %v, theirs %v", o.Syntax(), t.Syntax())
		}
	}
	c.messages(t.Messages())
	c.enums(t.Enums())
	for i := 0; i < t.Services().Len(); i++ {
		c.service(t.Services().Get(i))
	}
}

// sameFile reports a declared-in-file diff when o and t live in files with
// different paths.
func (c *comparer) sameFile(o, t protoreflect.Descriptor) {
	if op, tp := o.ParentFile().Path(), t.ParentFile().Path(); op != tp {
		c.add(DeclaredInFile, t.FullName(), "ours %s, theirs %s", op, tp)
	}
}

func (c *comparer) messages(ms protoreflect.MessageDescriptors) {
	for i := 0; i < ms.Len(); i++ {
		c.message(ms.Get(i))
	}
}

func (c *comparer) enums(es protoreflect.EnumDescriptors) {
	for i := 0; i < es.Len(); i++ {
		c.enum(es.Get(i))
	}
}

func (c *comparer) message(t protoreflect.MessageDescriptor) {
	c.rep.Checked.Messages++
	c.rep.Checked.Fields += t.Fields().Len()
	c.rep.Checked.Oneofs += realOneofs(t)
	// Nested types are checked even when the parent is missing, so one
	// missing message reports everything it would have carried.
	defer c.messages(t.Messages())
	defer c.enums(t.Enums())

	o, ok := c.ours.names[t.FullName()].(protoreflect.MessageDescriptor)
	if !ok {
		c.add(MissingMessage, t.FullName(), "%s", describeOther(c.ours.names[t.FullName()]))
		return
	}
	c.sameFile(o, t)
	if o.IsMapEntry() != t.IsMapEntry() {
		c.add(MessageMapEntry, t.FullName(), "ours %v, theirs %v", o.IsMapEntry(), t.IsMapEntry())
	}
	for i := 0; i < t.Oneofs().Len(); i++ {
		to := t.Oneofs().Get(i)
		if to.IsSynthetic() {
			continue // proto3 optional; checked per field
		}
		if oo := o.Oneofs().ByName(to.Name()); oo == nil || oo.IsSynthetic() {
			c.add(MissingOneof, to.FullName(), "")
		}
	}
	for i := 0; i < t.Fields().Len(); i++ {
		c.field(o, t.Fields().Get(i))
	}
}

func realOneofs(m protoreflect.MessageDescriptor) int {
	n := 0
	for i := 0; i < m.Oneofs().Len(); i++ {
		if !m.Oneofs().Get(i).IsSynthetic() {
			n++
		}
	}
	return n
}

func (c *comparer) field(om protoreflect.MessageDescriptor, t protoreflect.FieldDescriptor) {
	o := om.Fields().ByName(t.Name())
	if o == nil {
		detail := ""
		if same := om.Fields().ByNumber(t.Number()); same != nil {
			detail = fmt.Sprintf("number %d is ours %q", t.Number(), same.Name())
		}
		c.add(MissingField, t.FullName(), "%s", detail)
		return
	}
	name := t.FullName()
	if o.Number() != t.Number() {
		c.add(FieldNumber, name, "ours %d, theirs %d", o.Number(), t.Number())
	}
	if o.Kind() != t.Kind() {
		c.add(FieldKind, name, "ours %v, theirs %v", o.Kind(), t.Kind())
	} else if on, tn := typeName(o), typeName(t); on != tn {
		c.add(FieldType, name, "ours %s, theirs %s", on, tn)
	}
	if o.Cardinality() != t.Cardinality() {
		c.add(FieldCardinality, name, "ours %v, theirs %v", o.Cardinality(), t.Cardinality())
	}
	if on, tn := oneofName(o), oneofName(t); on != tn {
		c.add(FieldOneof, name, "ours %q, theirs %q", on, tn)
	}
	if o.HasOptionalKeyword() != t.HasOptionalKeyword() || o.HasPresence() != t.HasPresence() {
		c.add(FieldOptional, name, "ours optional=%v presence=%v, theirs optional=%v presence=%v",
			o.HasOptionalKeyword(), o.HasPresence(), t.HasOptionalKeyword(), t.HasPresence())
	}
	if o.JSONName() != t.JSONName() {
		c.add(FieldJSONName, name, "ours %q, theirs %q", o.JSONName(), t.JSONName())
	}
	if o.IsPacked() != t.IsPacked() {
		c.add(FieldPacked, name, "ours %v, theirs %v", o.IsPacked(), t.IsPacked())
	}
	if o.HasDefault() != t.HasDefault() ||
		(t.HasDefault() && fmt.Sprint(o.Default().Interface()) != fmt.Sprint(t.Default().Interface())) {
		c.add(FieldDefault, name, "ours %v, theirs %v", defaultText(o), defaultText(t))
	}
}

func typeName(f protoreflect.FieldDescriptor) protoreflect.FullName {
	switch {
	case f.Message() != nil:
		return f.Message().FullName()
	case f.Enum() != nil:
		return f.Enum().FullName()
	}
	return ""
}

func oneofName(f protoreflect.FieldDescriptor) protoreflect.Name {
	if od := f.ContainingOneof(); od != nil && !od.IsSynthetic() {
		return od.Name()
	}
	return ""
}

func defaultText(f protoreflect.FieldDescriptor) string {
	if !f.HasDefault() {
		return "none"
	}
	return fmt.Sprint(f.Default().Interface())
}

func describeOther(d protoreflect.Descriptor) string {
	switch d.(type) {
	case nil:
		return ""
	case protoreflect.MessageDescriptor:
		return "ours declares it as a message"
	case protoreflect.EnumDescriptor:
		return "ours declares it as an enum"
	case protoreflect.ServiceDescriptor:
		return "ours declares it as a service"
	}
	return fmt.Sprintf("ours declares it as %T", d)
}

func (c *comparer) enum(t protoreflect.EnumDescriptor) {
	c.rep.Checked.Enums++
	c.rep.Checked.EnumValues += t.Values().Len()
	o, ok := c.ours.names[t.FullName()].(protoreflect.EnumDescriptor)
	if !ok {
		c.add(MissingEnum, t.FullName(), "%s", describeOther(c.ours.names[t.FullName()]))
		return
	}
	c.sameFile(o, t)
	if o.IsClosed() != t.IsClosed() {
		c.add(EnumClosed, t.FullName(), "ours closed=%v, theirs closed=%v", o.IsClosed(), t.IsClosed())
	}
	for i := 0; i < t.Values().Len(); i++ {
		tv := t.Values().Get(i)
		ov := o.Values().ByName(tv.Name())
		if ov == nil {
			detail := ""
			if same := o.Values().ByNumber(tv.Number()); same != nil {
				detail = fmt.Sprintf("number %d is ours %q", tv.Number(), same.Name())
			}
			c.add(MissingEnumValue, valueName(tv), "%s", detail)
			continue
		}
		if ov.Number() != tv.Number() {
			c.add(EnumValueNumber, valueName(tv), "ours %d, theirs %d", ov.Number(), tv.Number())
		}
	}
}

// valueName names an enum value as Enum.VALUE. (protobuf scopes enum values
// beside their enum, so FullName alone would not say which enum.)
func valueName(v protoreflect.EnumValueDescriptor) string {
	return string(v.Parent().FullName()) + "." + string(v.Name())
}

func (c *comparer) service(t protoreflect.ServiceDescriptor) {
	c.rep.Checked.Services++
	c.rep.Checked.Methods += t.Methods().Len()
	for i := 0; i < t.Methods().Len(); i++ {
		c.rep.Methods = append(c.rep.Methods, string(t.Methods().Get(i).FullName()))
	}
	o, ok := c.ours.names[t.FullName()].(protoreflect.ServiceDescriptor)
	if !ok {
		c.add(MissingService, t.FullName(), "%s", describeOther(c.ours.names[t.FullName()]))
		return
	}
	c.sameFile(o, t)
	for i := 0; i < t.Methods().Len(); i++ {
		tm := t.Methods().Get(i)
		om := o.Methods().ByName(tm.Name())
		if om == nil {
			c.add(MissingMethod, tm.FullName(), "")
			continue
		}
		if a, b := om.Input().FullName(), tm.Input().FullName(); a != b {
			c.add(MethodInput, tm.FullName(), "ours %s, theirs %s", a, b)
		}
		if a, b := om.Output().FullName(), tm.Output().FullName(); a != b {
			c.add(MethodOutput, tm.FullName(), "ours %s, theirs %s", a, b)
		}
		if om.IsStreamingClient() != tm.IsStreamingClient() || om.IsStreamingServer() != tm.IsStreamingServer() {
			c.add(MethodStreaming, tm.FullName(), "ours %s, theirs %s", streaming(om), streaming(tm))
		}
	}
}

func streaming(m protoreflect.MethodDescriptor) string {
	switch {
	case m.IsStreamingClient() && m.IsStreamingServer():
		return "bidi-streaming"
	case m.IsStreamingClient():
		return "client-streaming"
	case m.IsStreamingServer():
		return "server-streaming"
	}
	return "unary"
}
