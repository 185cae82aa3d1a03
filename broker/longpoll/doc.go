// Package longpoll parks receives and pulls that found nothing until a
// message arrives, an ack/nack/expiry makes one visible, their wait ends or
// the broker drains. Waiters register per key (a topic) before they look,
// so a wake between the look and the wait is never lost.
//
// Pulls (Watch) each wait for their own queue and offset and are all woken
// by a notify. POP receives (WatchOne) come in classes of interchangeable
// waiters (one group, one filter, one queue or any): a notify wakes the
// longest-waiting member of each class, and a member that took messages
// passes the wake to the next, so an arrival wakes one or two receives of
// a group however many are parked.
//
// longpoll imports only broker/mqerr and the standard library.
package longpoll
