package api

import "strings"

// Step is one next step of a diagnosis: what to do, in words, and the
// kubectl mpijob command that does it, when there is one. Text holds the
// command as Command.String() writes it, so the CLI prints Text as it is,
// and another interface puts its own form of the same command in its
// place (the SDK its call: sdk/python/mpijob/nextsteps.py) without reading
// the words: pkg/api/testdata/steps.json holds the vectors both test.
type Step struct {
	Text    string   `json:"text"`
	Command *Command `json:"command,omitempty"`
}

// Command is a kubectl mpijob command of a next step.
type Command struct {
	// Verb is the subcommand: logs, clone, describe, events, "runtimes
	// list" or create.
	Verb string `json:"verb"`
	// Args follow the verb: the job's name (and a clone's new name), then
	// flags and their values, then "--" and the program's words, where a
	// word in angle brackets (<command>) stands for the job's own program.
	Args []string `json:"args,omitempty"`
}

// CommandPrefix starts every Command's String.
const CommandPrefix = "kubectl mpijob "

// String is the command as a user types it.
func (c Command) String() string {
	return CommandPrefix + strings.Join(append([]string{c.Verb}, c.Args...), " ")
}

// Placeholders a rule writes in a command for the job's name and a
// clone's new name; Named fills them in.
const (
	NamePlaceholder = "NAME"
	NewPlaceholder  = "NEW"
)

// Named is the step with its command's placeholders filled in: NAME is
// job, NEW is job-2; its text says the filled command in place of the
// placeholder one.
func (s Step) Named(job string) Step {
	if s.Command == nil {
		return s
	}
	c := Command{Verb: s.Command.Verb}
	if s.Command.Args != nil {
		c.Args = make([]string, len(s.Command.Args))
	}
	for i, a := range s.Command.Args {
		switch a {
		case NamePlaceholder:
			a = job
		case NewPlaceholder:
			a = job + "-2"
		}
		c.Args[i] = a
	}
	return Step{Text: strings.Replace(s.Text, s.Command.String(), c.String(), 1), Command: &c}
}

// StepTexts are the texts of steps, in order.
func StepTexts(steps []Step) []string {
	if steps == nil {
		return nil
	}
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Text
	}
	return out
}
