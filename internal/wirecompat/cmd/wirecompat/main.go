package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	theirs "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/reflect/protoreflect"

	ours "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/wirecompat"
)

// output is what -json prints.
type output struct {
	wirecompat.Report
	Additions []string `json:"additions,omitempty"`
}

func main() {
	jsonOut := flag.Bool("json", false, "print the report as JSON")
	additions := flag.Bool("additions", false, "also list elements ours has beyond the official package")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}

	oursFiles := []protoreflect.FileDescriptor{
		ours.File_apache_rocketmq_v2_definition_proto,
		ours.File_apache_rocketmq_v2_service_proto,
		ours.File_apache_rocketmq_v2_admin_proto,
	}
	theirsFiles := []protoreflect.FileDescriptor{
		theirs.File_apache_rocketmq_v2_definition_proto,
		theirs.File_apache_rocketmq_v2_service_proto,
		theirs.File_apache_rocketmq_v2_admin_proto,
	}

	out := output{Report: wirecompat.Compare(oursFiles, theirsFiles)}
	if *additions {
		out.Additions = wirecompat.Additions(oursFiles, theirsFiles)
	}

	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(os.Stderr, "wirecompat:", err)
			os.Exit(2)
		}
	} else {
		c := out.Checked
		fmt.Printf("checked %d files, %d messages, %d fields, %d oneofs, %d enums, %d enum values, %d services, %d methods\n",
			c.Files, c.Messages, c.Fields, c.Oneofs, c.Enums, c.EnumValues, c.Services, c.Methods)
		for _, d := range out.Diffs {
			fmt.Println("DIFF", d)
		}
		for _, a := range out.Additions {
			fmt.Println("ADDED", a)
		}
		fmt.Printf("%d differences\n", len(out.Diffs))
	}
	if len(out.Diffs) > 0 {
		os.Exit(1)
	}
}
