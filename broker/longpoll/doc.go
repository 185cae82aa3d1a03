// Package longpoll parks receives and pulls that found nothing until a
// message arrives, an ack/nack/expiry makes one visible, their wait ends or
// the broker drains. Waiters register per key (a topic) before they look,
// so a wake between the look and the wait is never lost.
//
// longpoll imports only broker/mqerr and the standard library.
package longpoll
