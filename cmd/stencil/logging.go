package main

import (
	"fmt"
	"io"

	logsapi "k8s.io/component-base/logs/api/v1"
	logsjson "k8s.io/component-base/logs/json"
	"k8s.io/klog/v2"
)

// Values of stencil run's --logging-format.
const (
	loggingText = "text"
	loggingJSON = "json"
)

// setupLogging makes klog, and every logger taken from it, write in format
// at verbosity v to w: "text" is klog's own format, "json" one JSON object
// per line with the keys the text shows ("msg", "err", the key/value pairs)
// plus "ts", "caller" and "v", as Kubernetes' components write it
// (--logging-format=json of kube-apiserver and the rest).
//
// JSON comes from component-base's logs/json, already in the module graph
// (via apiextensions-apiserver): it adds only zap and zapr to the binary,
// and a log pipeline that parses the Kubernetes components' JSON parses
// stencil's. A hand-written sink would save those two but re-solve what
// zapr does for klog's values (KObj, KRef, errors, verbosity).
func setupLogging(format string, v int, w io.Writer) error {
	switch format {
	case loggingText:
		return nil
	case loggingJSON:
		logger, control := logsjson.Factory{}.Create(
			logsapi.LoggingConfiguration{Verbosity: logsapi.VerbosityLevel(v)},
			logsapi.LoggingOptions{ErrorStream: w, InfoStream: w})
		// Contextual: klog.FromContext and klog.Background hand out this
		// logger itself, so that its own verbosity (v) decides.
		klog.SetLoggerWithOptions(logger, klog.ContextualLogger(true), klog.FlushLogger(control.Flush))
		return nil
	}
	return fmt.Errorf("--logging-format %q: want %s or %s", format, loggingText, loggingJSON)
}
