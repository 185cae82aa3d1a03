// Package clock supplies time to everything that schedules: POP
// invisibility, redelivery, delay, transaction checks, long polls and
// client liveness. Real uses the system clock; Fake is advanced by tests,
// so no test sleeps to make time pass.
//
// Process is the clock the composition root gives the broker: Real, except
// in a binary built with the mqgate_testhooks tag, where the environment
// variable MQGATE_TEST_CLOCK_OFFSET shifts it (an Offset clock) so that
// end-to-end tests can run cluster members with skewed clocks. Production
// builds do not compile that file and cannot be skewed.
//
// Files: clock.go holds the Clock interface, the real clock and the Fake.
//
// clock imports only the standard library.
package clock
