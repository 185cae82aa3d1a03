// Package auth owns mqgate's users and how a caller proves to be one of
// them: the users file (access key, secret key, what each may do), the two
// signature schemes the official clients use (the v2 gRPC MQv2-HMAC-SHA1
// `authorization` header, and the classic remoting ACL fields
// AccessKey/Signature), and the permission checks
// listeners make before they call the broker.
//
// A listener authenticates each call (V2 or Remoting), puts the user in
// the call's context (NewContext), and checks what the call touches with
// Allow. With auth disabled (no users file) there is no Authenticator and
// Allow lets everything through; with it enabled, a context without a user
// is refused, so a path that skipped authentication fails closed.
//
// Failures are mqerr errors of KindUnauthorized: the listeners map them
// to UNAUTHORIZED 40100 (v2, as upstream does for both authentication and
// authorization), HTTP 401 (REST) and NO_PERMISSION (remoting).
//
// Files: auth.go (the Authenticator: the v2 and classic signatures, the
// clock window, permission checks, refusal counts) and users.go (the users
// file: parsing, validation, the immutable Users set).
//
// auth must not import gen/, grpc, protobuf or any listener package: it is
// shared by the gRPC, REST and remoting edges.
package auth
