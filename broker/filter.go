package broker

import (
	"sync"
	"sync/atomic"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/sqlfilter"
)

// SQLFilter compiles an SQL92 filter expression (RocketMQ's language over
// message properties, broker/sqlfilter) into a Filter. A malformed
// expression is a KindIllegalFilter error saying what is wrong and where.
//
// Compiled expressions are cached by their text: a push consumer sends its
// subscription's expression with every receive. The cache keeps the first
// sqlCacheSize distinct expressions of at most sqlCacheMaxLen bytes and
// compiles the others each time, so clients cannot grow it past a few
// megabytes.
func SQLFilter(expr string) (model.Filter, error) {
	if v, ok := sqlCache.m.Load(expr); ok {
		return model.Filter{SQL: v.(*sqlfilter.Expr)}, nil
	}
	e, err := sqlfilter.Compile(expr)
	if err != nil {
		return model.Filter{}, mqerr.Wrap(mqerr.KindIllegalFilter, err, "illegal SQL92 filter expression")
	}
	if len(expr) <= sqlCacheMaxLen && sqlCache.n.Load() < sqlCacheSize {
		if _, loaded := sqlCache.m.LoadOrStore(expr, e); !loaded {
			sqlCache.n.Add(1)
		}
	}
	return model.Filter{SQL: e}, nil
}

const (
	sqlCacheSize   = 256
	sqlCacheMaxLen = 512
)

var sqlCache struct {
	m sync.Map // expression → *sqlfilter.Expr
	n atomic.Int64
}
