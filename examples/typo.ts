// A deliberate mistake, to show how errors read: the tool is `get_sum`, not `get_summ`.
// Run: sandgate run examples/typo.ts --config examples/sandgate.toml
const total = await everything.get_summ({ a: 1, b: 2 });
return total;
