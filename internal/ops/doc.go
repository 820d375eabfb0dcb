// Package ops implements weir's operators on top of the runtime's Operator
// contract: sources and sinks around connectors, the stateless record
// transformations, keyed process functions with state and timers, and
// windows. Package stream wires them into chains; users never see them.
package ops
