// Package sqlfilter owns RocketMQ's SQL92 message filter language: it
// compiles a filter expression (the text a consumer subscribes with when its
// expression type is SQL92) into an [Expr] and evaluates that expression over
// a message's string properties, user properties and system ones such as
// TAGS and KEYS alike.
//
// The language, the compile-time checks and the three-valued evaluation
// (TRUE, FALSE, NULL) follow Apache RocketMQ's filter module
// (SelectorParser.jj and org.apache.rocketmq.filter.expression), including
// its Java-specific conversions between Integer, Long, Double, String and
// Boolean values, so that an expression accepted or rejected by a RocketMQ
// broker is accepted or rejected here and selects the same messages.
//
// Files: lex.go (tokens, as RocketMQ's grammar has them), parse.go (the
// grammar, into an expression tree), eval.go (evaluation with SQL's
// three-valued logic), value.go (the value types and their Java-like
// conversions), sqlfilter.go (Compile and the Properties interface).
//
// The package imports only the standard library. It must not import
// storage/, gateway/, gen/ or any other mqgate package: a message reaches it
// through the one-method [Properties] interface, which *message.Message in
// storage/message satisfies.
package sqlfilter
