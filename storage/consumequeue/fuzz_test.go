package consumequeue

import "testing"

// FuzzUnescape: Unescape never panics; a directory name it accepts is
// exactly Escape of the topic it yields (one directory per topic: Open
// reads a queue from Escape(topic), so any other spelling would name a
// directory that is not there); and every topic survives Escape.
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"%RETRY%g/x", "a", "..", "日本", "a%2Fb", ""} {
		f.Add(Escape(s), s)
	}
	for _, s := range []string{"%2f", "a.b", "%", "%4", "%zz", "%+1", ".DS_Store"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, name, topic string) {
		if got, err := Unescape(name); err == nil && Escape(got) != name {
			t.Fatalf("%q unescapes to %q, which escapes to %q", name, got, Escape(got))
		}
		if got, err := Unescape(Escape(topic)); err != nil || got != topic {
			t.Fatalf("%q escaped to %q unescapes to %q %v", topic, Escape(topic), got, err)
		}
	})
}
