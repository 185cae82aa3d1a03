package sqlfilter

// Properties is what an expression reads of a message: its properties by name
// (user properties and system ones such as TAGS, KEYS). *message.Message in
// storage/message has this method; do not import it. It is an alias of the
// unnamed interface, so *Expr satisfies any Match(interface{ Get... }) bool
// interface, such as broker/model's Matcher, without an adapter.
type Properties = interface {
	Get(key string) (string, bool)
}

// MaxLength is the longest expression Compile accepts (bytes).
const MaxLength = 4096

// maxDepth is how deeply Compile lets parentheses and unary operators
// (+, -, NOT) nest. RocketMQ has no such limit; it keeps the recursive
// descent parser bounded on hostile input.
const maxDepth = 64

// Expr is a compiled expression; safe for concurrent use by many goroutines.
// It is immutable once Compile returns it.
type Expr struct {
	src  string
	root *node
}

// Compile parses and checks src. Errors are descriptive (position and what was
// expected/found, or which check failed) and are returned as error values; Compile
// never panics, whatever the input.
func Compile(src string) (*Expr, error) {
	root, err := parse(src)
	if err != nil {
		return nil, err
	}
	return &Expr{src: src, root: root}, nil
}

// Match reports whether the message matches: the expression evaluates to TRUE.
// Unknown (NULL) and FALSE do not match, and neither does an evaluation error
// (e.g. a property that does not parse as a number in a numeric comparison).
// A nil p is a message without properties.
func (e *Expr) Match(p Properties) bool {
	if e == nil || e.root == nil {
		return false
	}
	if p == nil {
		p = noProperties{}
	}
	v, ok := e.root.eval(p)
	return ok && v.k == vBool && v.b
}

// String returns the source text given to Compile.
func (e *Expr) String() string {
	if e == nil {
		return ""
	}
	return e.src
}

type noProperties struct{}

func (noProperties) Get(string) (string, bool) { return "", false }
