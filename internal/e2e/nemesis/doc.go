// Package nemesis is the model and the judge of the cluster nemesis test
// (internal/e2e/cluster, TestNemesis): History records every operation a
// client made as the client saw it (when it asked, when it had the
// answer, what it was answered); Check verifies such a history against
// mqgate's delivery guarantees (every send answered OK is delivered, no
// message is handed out again inside an invisibility window, nothing
// acknowledged comes back, transactions and delayed messages keep their
// word, see the Rule constants) and Report explains each violation with
// its events; Plan is the seeded schedule of faults (kills, pauses,
// partitions, leadership transfers, clock skew) the test injects.
//
// Files: history.go (the operations clients made and what they learnt),
// check.go (the properties Check verifies over a history), plan.go (the
// seeded schedule of faults).
//
// It knows nothing of the clients or of the server: it imports only the
// standard library, so its checker is tested on synthetic histories.
package nemesis
