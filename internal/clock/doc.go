// Package clock supplies time to everything that schedules: POP
// invisibility, redelivery, delay, transaction checks, long polls and
// client liveness. Real uses the system clock; Fake is advanced by tests,
// so no test sleeps to make time pass.
//
// clock imports only the standard library.
package clock
