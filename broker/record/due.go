package record

// PropDueMS holds the due time (unix ms) of a record staged by
// delay.StageRecord (a classic send-back's redelivery carries no
// TIMER_DELIVER_MS); mqgate's own name, removed when the record is
// published and reserved so no producer can set it.
const PropDueMS = "__MQG_DUE_MS"

func init() { reserved[PropDueMS] = true }
