package remoting

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// The NameServer side: every route names this listener as the only
// broker (brokerAddrs {"0": <advertised>}) — never the gRPC port.

// autoCreateTopic is upstream's auto-create template topic.
const autoCreateTopic = "TBW102"

// Route JSON. encoding/json output is compact, and
// brokerAddrs, a map[int64]string, is written with quoted numeric keys
// and no whitespace: Go v2.1.2 cuts brokerAddrs by hand.
type queueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	WriteQueueNums int32  `json:"writeQueueNums"`
	Perm           int32  `json:"perm"`
	TopicSysFlag   int32  `json:"topicSysFlag"`
}

type brokerData struct {
	Cluster            string           `json:"cluster"`
	BrokerName         string           `json:"brokerName"`
	BrokerAddrs        map[int64]string `json:"brokerAddrs"`
	EnableActingMaster bool             `json:"enableActingMaster"`
}

type topicRouteData struct {
	QueueDatas        []queueData         `json:"queueDatas"`
	BrokerDatas       []brokerData        `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
}

// Permission bits of routes and topic configs.
const (
	permInherit = 1
	permWrite   = 2
	permRead    = 4
)

func permOf(p model.Perm) int32 {
	switch p {
	case model.PermRead:
		return permRead
	case model.PermWrite:
		return permWrite
	case model.PermNone:
		return 0
	}
	return permRead | permWrite
}

func permFrom(bits int32) model.Perm {
	switch r, w := bits&permRead != 0, bits&permWrite != 0; {
	case r && w:
		return model.PermReadWrite
	case r:
		return model.PermRead
	case w:
		return model.PermWrite
	}
	return model.PermNone
}

func (s *Server) brokerData(c *conn) brokerData {
	return brokerData{Cluster: s.cfg.ClusterName, BrokerName: s.cfg.BrokerName, BrokerAddrs: map[int64]string{0: s.advertised(c)}}
}

// RouteMember is another member of a replica group that routes name:
// ID names its broker ("<broker name>-<ID>"), Addr is its remoting
// listener's address.
type RouteMember struct {
	ID   uint64
	Addr string
}

// routeInfo answers a topic's route. Its broker, BrokerName, is the
// member the client asked (advertised): every queue readable and
// writable there. In a replica group (Config.Members) each other member
// that routes name is a broker too, "<BrokerName>-<ID>" at that member's
// address, with every queue writable and none readable: a producer sends
// through any of them (each relays to the leader, and a queue id is the
// same queue whichever broker name the client puts on it), so when the
// member it asked dies, the producer's retries and next sends reach the
// others before its next route refresh; consumers see the asked member's
// queues only, each once, as before.
func (s *Server) routeInfo(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	topic := f.str("topic", true)
	if r := f.failed(); r != nil {
		return r
	}
	notFound := &codec.Command{Code: codeTopicNotExist, Remark: "No topic route info in name server for the topic: " + topic}
	var qd queueData
	others := false
	if topic == s.replyTopic() {
		// Request/reply responders send here (reply.go); a route only.
		qd = queueData{ReadQueueNums: 1, WriteQueueNums: 1, Perm: permRead | permWrite}
	} else if topic == autoCreateTopic {
		// Producers of an unknown topic fall back to this route; only
		// offer it when a send would create the topic (trap 9).
		if !s.cl.AutoCreate() {
			return notFound
		}
		qd = queueData{ReadQueueNums: 8, WriteQueueNums: 8, Perm: permRead | permWrite | permInherit}
	} else {
		ctx, cancel := s.requestContext(ctx)
		defer cancel()
		t, err := s.cl.RouteTopic(ctx, topic)
		if err != nil {
			if k := mqerr.KindOf(err); k == mqerr.KindTopicNotFound || k == mqerr.KindIllegalTopic {
				return notFound
			}
			return s.fail(ctx, err)
		}
		qd = queueData{ReadQueueNums: t.Queues, WriteQueueNums: t.Queues, Perm: permOf(t.Perm)}
		others = t.Perm.Writable()
	}
	qd.BrokerName = s.cfg.BrokerName
	route := topicRouteData{QueueDatas: []queueData{qd}, BrokerDatas: []brokerData{s.brokerData(c)},
		FilterServerTable: map[string][]string{}}
	if others && s.cfg.Members != nil {
		asked := route.BrokerDatas[0].BrokerAddrs[0]
		for _, m := range s.cfg.Members(ctx) {
			if m.Addr == "" || m.Addr == asked {
				continue
			}
			name := s.cfg.BrokerName + "-" + strconv.FormatUint(m.ID, 10)
			route.QueueDatas = append(route.QueueDatas, queueData{BrokerName: name, WriteQueueNums: qd.WriteQueueNums, Perm: permWrite})
			route.BrokerDatas = append(route.BrokerDatas, brokerData{Cluster: s.cfg.ClusterName, BrokerName: name,
				BrokerAddrs: map[int64]string{0: m.Addr}})
		}
	}
	body, err := json.Marshal(route)
	if err != nil {
		return s.fail(c.ctx, err)
	}
	return &codec.Command{Code: codeSuccess, Body: body}
}

func (s *Server) clusterInfo(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	bd := s.brokerData(c)
	body, err := json.Marshal(struct {
		BrokerAddrTable  map[string]brokerData `json:"brokerAddrTable"`
		ClusterAddrTable map[string][]string   `json:"clusterAddrTable"`
	}{map[string]brokerData{bd.BrokerName: bd}, map[string][]string{bd.Cluster: {bd.BrokerName}}})
	if err != nil {
		return s.fail(c.ctx, err)
	}
	return &codec.Command{Code: codeSuccess, Body: body}
}

func (s *Server) topicList(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	names, bad := s.topicNames(ctx)
	if bad != nil {
		return bad
	}
	body, _ := json.Marshal(struct {
		TopicList []string `json:"topicList"`
	}{names})
	return &codec.Command{Code: codeSuccess, Body: body}
}

// topicNames lists every topic's name (the broker's order), or the
// answer to give when the listing fails.
func (s *Server) topicNames(ctx context.Context) ([]string, *codec.Command) {
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	ts, err := s.b.ListTopics(ctx)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		names = append(names, t.Name)
	}
	return names, nil
}

// kvConfig keeps PUT_KV_CONFIG values (e.g. mqadmin's ORDER_TOPIC_CONFIG)
// in memory: mqgate derives nothing from them.
type kvConfig struct {
	mu sync.Mutex
	m  map[string]string
}

const maxKV = 10000

func kvKey(ns, k string) string { return strconv.Itoa(len(ns)) + ":" + ns + k }

func (s *Server) putKV(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	ns, k, v := f.str("namespace", true), f.str("key", true), f.str("value", false)
	if r := f.failed(); r != nil {
		return r
	}
	s.kv.mu.Lock()
	defer s.kv.mu.Unlock()
	if _, exists := s.kv.m[kvKey(ns, k)]; !exists && len(s.kv.m) >= maxKV {
		return &codec.Command{Code: codeSystemBusy, Remark: "too many KV config entries"}
	}
	s.kv.m[kvKey(ns, k)] = v
	return ok()
}

func (s *Server) getKV(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	ns, k := f.str("namespace", true), f.str("key", true)
	if r := f.failed(); r != nil {
		return r
	}
	s.kv.mu.Lock()
	v, found := s.kv.m[kvKey(ns, k)]
	s.kv.mu.Unlock()
	if !found {
		return &codec.Command{Code: codeQueryNotFound, Remark: "No config item, Namespace: " + ns + " Key: " + k}
	}
	return &codec.Command{Code: codeSuccess, Ext: map[string]string{"value": v}}
}

func (s *Server) deleteKV(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	ns, k := f.str("namespace", true), f.str("key", true)
	if r := f.failed(); r != nil {
		return r
	}
	s.kv.mu.Lock()
	delete(s.kv.m, kvKey(ns, k))
	s.kv.mu.Unlock()
	return ok()
}
