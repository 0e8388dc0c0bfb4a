package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// TestSecondSignalExitsAtOnce runs exitOnSecondSignal in a child process
// whose first signal has already arrived (its context is done, as while
// draining) and checks that the next SIGTERM ends it with status 1.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	if os.Getenv("STENCIL_SIGNAL_CHILD") == "1" {
		// Hold SIGTERM from the start, so that it never takes its default
		// action (killing the process) before the handler is in place.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		go exitOnSecondSignal(ctx, func() {})
		os.Stdout.WriteString("ready\n")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondSignalExitsAtOnce$")
	cmd.Env = append(os.Environ(), "STENCIL_SIGNAL_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("child ended with %v, want exit status 1", err)
			}
			return
		case <-tick.C:
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatal("child still running 10s after SIGTERM")
		}
	}
}
