package wirecompat_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/mqgate/mqgate/internal/wirecompat"
)

// baseFiles returns a small contract that exercises every shape the
// comparator looks at: nested message, map, proto3 optional, real oneof,
// enum and nested enum, and unary, server-, client- and bidi-streaming RPCs.
// Both files are built fresh on each call so a test can mutate its copy.
func baseFiles() []*descriptorpb.FileDescriptorProto {
	s := proto.String
	i32 := proto.Int32
	typ := func(t descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto_Type { return &t }
	lbl := func(l descriptorpb.FieldDescriptorProto_Label) *descriptorpb.FieldDescriptorProto_Label { return &l }
	opt := lbl(descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL)
	rep := lbl(descriptorpb.FieldDescriptorProto_LABEL_REPEATED)
	field := func(name string, num int32, l *descriptorpb.FieldDescriptorProto_Label, t descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: s(name), Number: i32(num), Label: l, Type: typ(t)}
		if typeName != "" {
			f.TypeName = s(typeName)
		}
		return f
	}
	inOneof := func(f *descriptorpb.FieldDescriptorProto, idx int32) *descriptorpb.FieldDescriptorProto {
		f.OneofIndex = i32(idx)
		return f
	}
	const (
		tString  = descriptorpb.FieldDescriptorProto_TYPE_STRING
		tInt32   = descriptorpb.FieldDescriptorProto_TYPE_INT32
		tInt64   = descriptorpb.FieldDescriptorProto_TYPE_INT64
		tBool    = descriptorpb.FieldDescriptorProto_TYPE_BOOL
		tMessage = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
		tEnum    = descriptorpb.FieldDescriptorProto_TYPE_ENUM
	)
	optionalField := field("o", 4, opt, tString, "")
	optionalField.Proto3Optional = proto.Bool(true)
	optionalField.OneofIndex = i32(1)

	defs := &descriptorpb.FileDescriptorProto{
		Name:    s("t/defs.proto"),
		Package: s("t.v1"),
		Syntax:  s("proto3"),
		EnumType: []*descriptorpb.EnumDescriptorProto{{
			Name: s("E"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: s("E_UNSPECIFIED"), Number: i32(0)},
				{Name: s("E_ONE"), Number: i32(1)},
			},
		}, {
			Name: s("F"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: s("F_UNSPECIFIED"), Number: i32(0)},
			},
		}},
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: s("M"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("s", 1, opt, tString, ""),
				field("n", 2, opt, tInt32, ""),
				field("r", 3, rep, tInt64, ""),
				optionalField,
				inOneof(field("c1", 5, opt, tString, ""), 0),
				inOneof(field("c2", 6, opt, tMessage, ".t.v1.M.Sub"), 0),
				field("e", 7, opt, tEnum, ".t.v1.E"),
				field("mp", 8, rep, tMessage, ".t.v1.M.MpEntry"),
				field("sub", 9, opt, tMessage, ".t.v1.M.Sub"),
			},
			OneofDecl: []*descriptorpb.OneofDescriptorProto{{Name: s("choice")}, {Name: s("_o")}},
			NestedType: []*descriptorpb.DescriptorProto{{
				Name:  s("Sub"),
				Field: []*descriptorpb.FieldDescriptorProto{field("b", 1, opt, tBool, "")},
			}, {
				Name: s("MpEntry"),
				Field: []*descriptorpb.FieldDescriptorProto{
					field("key", 1, opt, tString, ""),
					field("value", 2, opt, tString, ""),
				},
				Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
			}},
			EnumType: []*descriptorpb.EnumDescriptorProto{{
				Name:  s("Level"),
				Value: []*descriptorpb.EnumValueDescriptorProto{{Name: s("LOW"), Number: i32(0)}, {Name: s("HIGH"), Number: i32(1)}},
			}},
		}, {
			Name:  s("Other"),
			Field: []*descriptorpb.FieldDescriptorProto{field("x", 1, opt, tString, "")},
		}},
	}
	svc := &descriptorpb.FileDescriptorProto{
		Name:       s("t/svc.proto"),
		Package:    s("t.v1"),
		Syntax:     s("proto3"),
		Dependency: []string{"t/defs.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: s("S"),
			Method: []*descriptorpb.MethodDescriptorProto{
				{Name: s("Unary"), InputType: s(".t.v1.M"), OutputType: s(".t.v1.Other")},
				{Name: s("ServerStream"), InputType: s(".t.v1.M"), OutputType: s(".t.v1.M"), ServerStreaming: proto.Bool(true)},
				{Name: s("ClientStream"), InputType: s(".t.v1.M"), OutputType: s(".t.v1.M"), ClientStreaming: proto.Bool(true)},
				{Name: s("Bidi"), InputType: s(".t.v1.M"), OutputType: s(".t.v1.M"), ClientStreaming: proto.Bool(true), ServerStreaming: proto.Bool(true)},
			},
		}},
	}
	return []*descriptorpb.FileDescriptorProto{defs, svc}
}

func build(t *testing.T, fdps []*descriptorpb.FileDescriptorProto) []protoreflect.FileDescriptor {
	t.Helper()
	reg, err := protodesc.NewFiles(&descriptorpb.FileDescriptorSet{File: fdps})
	if err != nil {
		t.Fatalf("building descriptors: %v", err)
	}
	var out []protoreflect.FileDescriptor
	for _, p := range fdps {
		fd, err := reg.FindFileByPath(p.GetName())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fd)
	}
	return out
}

// helpers to reach into the base contract
func msgM(fs []*descriptorpb.FileDescriptorProto) *descriptorpb.DescriptorProto {
	return fs[0].MessageType[0]
}

func fieldOf(m *descriptorpb.DescriptorProto, name string) *descriptorpb.FieldDescriptorProto {
	for _, f := range m.Field {
		if f.GetName() == name {
			return f
		}
	}
	panic("no field " + name)
}

func removeField(m *descriptorpb.DescriptorProto, name string) {
	m.Field = slices.DeleteFunc(m.Field, func(f *descriptorpb.FieldDescriptorProto) bool { return f.GetName() == name })
}

func method(fs []*descriptorpb.FileDescriptorProto, name string) *descriptorpb.MethodDescriptorProto {
	for _, m := range fs[1].Service[0].Method {
		if m.GetName() == name {
			return m
		}
	}
	panic("no method " + name)
}

func TestCompareIdentical(t *testing.T) {
	rep := wirecompat.Compare(build(t, baseFiles()), build(t, baseFiles()))
	if len(rep.Diffs) != 0 {
		t.Fatalf("identical contracts differ: %v", rep.Diffs)
	}
	want := wirecompat.Counts{Files: 2, Messages: 4, Fields: 13, Oneofs: 1, Enums: 3, EnumValues: 5, Services: 1, Methods: 4}
	if rep.Checked != want {
		t.Fatalf("checked %+v, want %+v", rep.Checked, want)
	}
	if len(rep.Methods) != 4 || rep.Methods[0] != "t.v1.S.Bidi" {
		t.Fatalf("methods %v", rep.Methods)
	}
}

// TestCompareCatches mutates "ours" one way at a time and requires the
// comparator to report the matching kind on the matching element.
func TestCompareCatches(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto
		kind   wirecompat.Kind
		elem   string
	}{
		{"missing file", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fs[1].Name = proto.String("t/other.proto")
			return fs
		}, wirecompat.MissingFile, "t/svc.proto"},
		{"file package", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fs[1].Package = proto.String("t.v2")
			fs[1].Service[0].Method = nil // keep it buildable: no references into t.v1
			fs[1].Dependency = nil
			return fs
		}, wirecompat.FilePackage, "t/svc.proto"},
		{"file syntax", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fs[1].Syntax = proto.String("proto2")
			return fs
		}, wirecompat.FileSyntax, "t/svc.proto"},
		{"message in another file", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			other := fs[0].MessageType[1]
			fs[0].MessageType = fs[0].MessageType[:1]
			fs[1].MessageType = append(fs[1].MessageType, other)
			return fs
		}, wirecompat.DeclaredInFile, "t.v1.Other"},
		{"missing message", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fs[0].MessageType[1].Name = proto.String("Renamed")
			method(fs, "Unary").OutputType = proto.String(".t.v1.Renamed")
			return fs
		}, wirecompat.MissingMessage, "t.v1.Other"},
		{"missing nested message", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			m := msgM(fs)
			m.NestedType[0].Name = proto.String("Sub2")
			fieldOf(m, "c2").TypeName = proto.String(".t.v1.M.Sub2")
			fieldOf(m, "sub").TypeName = proto.String(".t.v1.M.Sub2")
			return fs
		}, wirecompat.MissingMessage, "t.v1.M.Sub"},
		{"message declared as enum", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fs[0].MessageType[1].Name = proto.String("Renamed")
			method(fs, "Unary").OutputType = proto.String(".t.v1.Renamed")
			fs[0].EnumType[1].Name = proto.String("Other")
			return fs
		}, wirecompat.MissingMessage, "t.v1.Other"},
		{"map entry flag", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			m := msgM(fs)
			m.NestedType[1].Name = proto.String("Mp2Entry") // a map needs an entry; point mp at a new one
			fieldOf(m, "mp").TypeName = proto.String(".t.v1.M.Mp2Entry")
			fieldOf(m, "mp").Name = proto.String("mp2")
			fieldOf(m, "mp2").JsonName = nil
			m.NestedType = append(m.NestedType, &descriptorpb.DescriptorProto{
				Name:  proto.String("MpEntry"),
				Field: []*descriptorpb.FieldDescriptorProto{fieldOf(m.NestedType[1], "key"), fieldOf(m.NestedType[1], "value")},
			})
			return fs
		}, wirecompat.MessageMapEntry, "t.v1.M.MpEntry"},
		{"missing field", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			removeField(msgM(fs), "n")
			return fs
		}, wirecompat.MissingField, "t.v1.M.n"},
		{"renamed field", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fieldOf(msgM(fs), "n").Name = proto.String("count")
			return fs
		}, wirecompat.MissingField, "t.v1.M.n"},
		{"field number", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fieldOf(msgM(fs), "n").Number = proto.Int32(20)
			return fs
		}, wirecompat.FieldNumber, "t.v1.M.n"},
		{"field kind", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fieldOf(msgM(fs), "n").Type = descriptorpb.FieldDescriptorProto_TYPE_SINT32.Enum()
			return fs
		}, wirecompat.FieldKind, "t.v1.M.n"},
		{"field message type", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fieldOf(msgM(fs), "sub").TypeName = proto.String(".t.v1.Other")
			return fs
		}, wirecompat.FieldType, "t.v1.M.sub"},
		{"field enum type", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fieldOf(msgM(fs), "e").TypeName = proto.String(".t.v1.F")
			return fs
		}, wirecompat.FieldType, "t.v1.M.e"},
		{"field cardinality", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fieldOf(msgM(fs), "r").Label = descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
			return fs
		}, wirecompat.FieldCardinality, "t.v1.M.r"},
		{"field left its oneof", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fieldOf(msgM(fs), "c1").OneofIndex = nil
			return fs
		}, wirecompat.FieldOneof, "t.v1.M.c1"},
		{"field joined a oneof", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fieldOf(msgM(fs), "e").OneofIndex = proto.Int32(0) // declared right after c2
			return fs
		}, wirecompat.FieldOneof, "t.v1.M.e"},
		{"oneof renamed", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			msgM(fs).OneofDecl[0].Name = proto.String("pick")
			return fs
		}, wirecompat.MissingOneof, "t.v1.M.choice"},
		{"proto3 optional dropped", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			m := msgM(fs)
			f := fieldOf(m, "o")
			f.Proto3Optional, f.OneofIndex = nil, nil
			m.OneofDecl = m.OneofDecl[:1]
			return fs
		}, wirecompat.FieldOptional, "t.v1.M.o"},
		{"proto3 optional added", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			m := msgM(fs)
			f := fieldOf(m, "n")
			f.Proto3Optional, f.OneofIndex = proto.Bool(true), proto.Int32(2)
			m.OneofDecl = append(m.OneofDecl, &descriptorpb.OneofDescriptorProto{Name: proto.String("_n")})
			return fs
		}, wirecompat.FieldOptional, "t.v1.M.n"},
		{"json name", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fieldOf(msgM(fs), "s").JsonName = proto.String("custom")
			return fs
		}, wirecompat.FieldJSONName, "t.v1.M.s"},
		{"packed", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fieldOf(msgM(fs), "r").Options = &descriptorpb.FieldOptions{Packed: proto.Bool(false)}
			return fs
		}, wirecompat.FieldPacked, "t.v1.M.r"},
		{"map value type", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fieldOf(msgM(fs).NestedType[1], "value").Type = descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum()
			return fs
		}, wirecompat.FieldKind, "t.v1.M.MpEntry.value"},
		{"missing enum", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fs[0].EnumType = fs[0].EnumType[:1]
			return fs
		}, wirecompat.MissingEnum, "t.v1.F"},
		{"missing nested enum", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			msgM(fs).EnumType = nil
			return fs
		}, wirecompat.MissingEnum, "t.v1.M.Level"},
		{"enum in another file", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			f := fs[0].EnumType[1]
			fs[0].EnumType = fs[0].EnumType[:1]
			fs[1].EnumType = append(fs[1].EnumType, f)
			return fs
		}, wirecompat.DeclaredInFile, "t.v1.F"},
		{"missing enum value", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fs[0].EnumType[0].Value = fs[0].EnumType[0].Value[:1]
			return fs
		}, wirecompat.MissingEnumValue, "t.v1.E.E_ONE"},
		{"renamed enum value", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fs[0].EnumType[0].Value[1].Name = proto.String("E_UNO")
			return fs
		}, wirecompat.MissingEnumValue, "t.v1.E.E_ONE"},
		{"enum value number", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			msgM(fs).EnumType[0].Value[1].Number = proto.Int32(7)
			return fs
		}, wirecompat.EnumValueNumber, "t.v1.M.Level.HIGH"},
		{"missing service", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fs[1].Service[0].Name = proto.String("S2")
			return fs
		}, wirecompat.MissingService, "t.v1.S"},
		{"service in another file", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			fs[0].Service, fs[1].Service = fs[1].Service, nil
			return fs
		}, wirecompat.DeclaredInFile, "t.v1.S"},
		{"missing method", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			method(fs, "Bidi").Name = proto.String("Both")
			return fs
		}, wirecompat.MissingMethod, "t.v1.S.Bidi"},
		{"method input", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			method(fs, "Unary").InputType = proto.String(".t.v1.Other")
			return fs
		}, wirecompat.MethodInput, "t.v1.S.Unary"},
		{"method output", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			method(fs, "Unary").OutputType = proto.String(".t.v1.M")
			return fs
		}, wirecompat.MethodOutput, "t.v1.S.Unary"},
		{"server streaming dropped", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			method(fs, "ServerStream").ServerStreaming = nil
			return fs
		}, wirecompat.MethodStreaming, "t.v1.S.ServerStream"},
		{"client streaming added", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			method(fs, "Unary").ClientStreaming = proto.Bool(true)
			return fs
		}, wirecompat.MethodStreaming, "t.v1.S.Unary"},
		{"bidi became server-only", func(fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			method(fs, "Bidi").ClientStreaming = nil
			return fs
		}, wirecompat.MethodStreaming, "t.v1.S.Bidi"},
	}
	theirs := build(t, baseFiles())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ours := build(t, tc.mutate(baseFiles()))
			rep := wirecompat.Compare(ours, theirs)
			for _, d := range rep.Diffs {
				if d.Kind == tc.kind && d.Element == tc.elem {
					return
				}
			}
			t.Fatalf("want %s on %s, got %v", tc.kind, tc.elem, rep.Diffs)
		})
	}
}

// TestCompareAllowsAdditions: ours may carry more than theirs.
func TestCompareAllowsAdditions(t *testing.T) {
	fs := baseFiles()
	m := msgM(fs)
	m.Field = append(m.Field, &descriptorpb.FieldDescriptorProto{
		Name: proto.String("extra"), Number: proto.Int32(50),
		Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
	})
	fs[0].EnumType[0].Value = append(fs[0].EnumType[0].Value, &descriptorpb.EnumValueDescriptorProto{Name: proto.String("E_TWO"), Number: proto.Int32(2)})
	fs[0].MessageType = append(fs[0].MessageType, &descriptorpb.DescriptorProto{Name: proto.String("New")})
	fs[1].Service[0].Method = append(fs[1].Service[0].Method, &descriptorpb.MethodDescriptorProto{
		Name: proto.String("Newer"), InputType: proto.String(".t.v1.New"), OutputType: proto.String(".t.v1.New"),
	})
	fs = append(fs, &descriptorpb.FileDescriptorProto{Name: proto.String("t/more.proto"), Package: proto.String("t.v1"), Syntax: proto.String("proto3")})
	ours, theirs := build(t, fs), build(t, baseFiles())

	if rep := wirecompat.Compare(ours, theirs); len(rep.Diffs) != 0 {
		t.Fatalf("additions reported as differences: %v", rep.Diffs)
	}
	got := wirecompat.Additions(ours, theirs)
	want := []string{"enum-value t.v1.E.E_TWO", "field t.v1.M.extra", "file t/more.proto", "message t.v1.New", "method t.v1.S.Newer"}
	if !slices.Equal(got, want) {
		t.Fatalf("additions:\n got %v\nwant %v", got, want)
	}
	// And the other way round the same additions are differences.
	rep := wirecompat.Compare(theirs, ours)
	if len(rep.Diffs) != len(want) {
		t.Fatalf("reverse compare: %v", rep.Diffs)
	}
	for _, d := range rep.Diffs {
		if !strings.HasPrefix(string(d.Kind), "missing-") {
			t.Fatalf("reverse compare: unexpected %v", d)
		}
	}
}
