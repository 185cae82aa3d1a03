package httpserver

import (
	_ "embed"
	"net/http"
)

// openAPI is gen/openapi/mqgate.swagger.json, copied here by `make
// generate` (go:embed cannot reach gen/ from this directory); `make
// check-generated` and TestOpenAPIIsTheGeneratedDocument keep it current.
//
//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
