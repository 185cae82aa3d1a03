package console

import (
	"encoding/json"
	"net/http"

	"github.com/mqgate/mqgate/broker/mqerr"
)

// errorBody is the console endpoints' error answer.
type errorBody struct {
	Error string `json:"error"`
}

// writeBrokerError is THE place a console endpoint's broker error gets its
// HTTP status.
func writeBrokerError(w http.ResponseWriter, err error) {
	writeError(w, httpStatus(mqerr.KindOf(err)), mqerr.Message(err))
}

func httpStatus(k mqerr.Kind) int {
	switch k {
	case mqerr.KindNotFound, mqerr.KindMessageNotFound, mqerr.KindTopicNotFound, mqerr.KindGroupNotFound, mqerr.KindOffsetNotFound:
		return http.StatusNotFound
	case mqerr.KindUnauthorized:
		return http.StatusUnauthorized
	case mqerr.KindForbidden:
		return http.StatusForbidden
	case mqerr.KindCanceled, mqerr.KindRequestTimeout:
		return http.StatusGatewayTimeout
	case mqerr.KindUnavailable, mqerr.KindStoreUnavailable:
		return http.StatusServiceUnavailable
	case mqerr.KindAlreadyExists:
		return http.StatusConflict
	case mqerr.KindTooManyRequests:
		return http.StatusTooManyRequests
	case mqerr.KindDiskFull:
		return http.StatusInsufficientStorage
	}
	if k >= mqerr.KindBadRequest && k <= mqerr.KindIllegalOffset { // the kinds of bad input
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
