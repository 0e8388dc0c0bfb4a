// Package controller is stencil's machinery: the work queue, the informers'
// event handlers, the workers, handleErr, the periodic resync, config
// reloads, the health and metrics servers, events, and when the workers
// run: always, under leader election, or as a ring member (ring.Run).
// What one sync does is the reconcile package's; what is watched is the
// registry's; who may write is the ha package's, and in a ring the ring
// package's.
//
// The choice a newcomer may question: handleErr alone turns a sync's answer
// into queue operations (a typed requeue from reconcile.Requeue, a terminal
// error, a fence refusal), so no reconcile phase schedules work of its own
// and every retry, back-off and drop is decided in one switch.
package controller
