package relay

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers each line with its name and the line.
func echoServer(t *testing.T, lis net.Listener, name string) {
	t.Helper()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write([]byte(name + ":" + sc.Text() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	return lis
}

func ask(t *testing.T, c net.Conn, rd *bufio.Reader, line string) (string, error) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return rd.ReadString('\n')
}

func TestRelayRoutesLocalThenRemoteAndClosesOnChange(t *testing.T) {
	leader := listen(t)
	echoServer(t, leader, "leader")
	r := New(listen(t), Options{Name: "test", LeaderWait: 5 * time.Second})
	echoServer(t, r.Local(), "local")
	go r.Run()
	t.Cleanup(func() { r.Close() })

	// No route yet: the dial waits, and is served once one is set.
	c, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.AfterFunc(50*time.Millisecond, func() { r.SetRoute(Route{Local: true}) })
	rd := bufio.NewReader(c)
	if got, err := ask(t, c, rd, "a"); err != nil || got != "local:a\n" {
		t.Fatalf("local route: %q, %v", got, err)
	}

	// A route change closes the connection; a new one goes to the leader.
	r.SetRoute(Route{Addr: leader.Addr().String()})
	if got, err := ask(t, c, rd, "b"); err == nil {
		t.Fatalf("connection of the old route still answered %q", got)
	}
	c2, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := ask(t, c2, bufio.NewReader(c2), "c"); err != nil || got != "leader:c\n" {
		t.Fatalf("remote route: %q, %v", got, err)
	}
	r.SetRoute(Route{Local: true})
	if got, err := ask(t, c2, bufio.NewReader(c2), "d"); err == nil {
		t.Fatalf("piped connection of the old route still answered %q", got)
	}
}

func TestRelayClosesWhenNoLeaderInTime(t *testing.T) {
	r := New(listen(t), Options{Name: "test", LeaderWait: 50 * time.Millisecond})
	go r.Run()
	t.Cleanup(func() { r.Close() })
	c, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read succeeded with no leader")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection was not closed after the leader wait")
	}
}

// A route with Greet set has Options.Greeting written to the leader
// ahead of the client's bytes, once per piped connection; a route
// without Greet pipes the client's bytes untouched, and a local route
// never greets.
func TestRelayGreetsOnlyWhenTheRouteSaysSo(t *testing.T) {
	leader := listen(t)
	echoServer(t, leader, "leader")
	greeting := func(c net.Conn) []byte { return []byte("via " + c.LocalAddr().String() + "\n") }
	r := New(listen(t), Options{Name: "test", Greeting: greeting})
	echoServer(t, r.Local(), "local")
	go r.Run()
	t.Cleanup(func() { r.Close() })
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", r.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}

	r.SetRoute(Route{Addr: leader.Addr().String(), Greet: true})
	c, rd := dial()
	if got, err := ask(t, c, rd, "a"); err != nil || got != "leader:via "+r.Addr().String()+"\n" {
		t.Fatalf("first line the leader read on a greeting route: %q, %v", got, err)
	}
	if got, err := rd.ReadString('\n'); err != nil || got != "leader:a\n" {
		t.Fatalf("the client's line after the greeting: %q, %v", got, err)
	}
	if got, err := ask(t, c, rd, "b"); err != nil || got != "leader:b\n" {
		t.Fatalf("a later line on the greeted connection: %q, %v", got, err)
	}

	r.SetRoute(Route{Addr: leader.Addr().String()})
	c, rd = dial()
	if got, err := ask(t, c, rd, "c"); err != nil || got != "leader:c\n" {
		t.Fatalf("first line the leader read on a route without greeting: %q, %v", got, err)
	}

	r.SetRoute(Route{Local: true, Greet: true})
	c, rd = dial()
	if got, err := ask(t, c, rd, "d"); err != nil || got != "local:d\n" {
		t.Fatalf("first line served locally: %q, %v", got, err)
	}
}
