// Package longpoll parks receives and pulls that found nothing until a
// message arrives, an ack/nack/expiry makes one visible, their wait ends or
// the broker drains. Waiters register per key (a topic, or one queue of a
// topic: QueueKey) before they look, so a wake between the look and the
// wait is never lost.
//
// Pulls (Watch, on their queue's key) each wait for their own offset and
// are all woken by a notify. POP receives (WatchOne, on the topic's key)
// come in classes of interchangeable waiters (one group, one filter, one
// queue or any): a notify wakes the longest-waiting member of each class,
// and a member that took messages passes the wake to the next, so an
// arrival wakes one or two receives of a group however many are parked.
//
// Files: longpoll.go holds the Hub and its waiters.
//
// longpoll imports only broker/mqerr and the standard library.
package longpoll
