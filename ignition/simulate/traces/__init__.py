"""Workload traces shipped with the simulator, so studies and tests read no path outside the repository.

`azure-llm-2023/`: the Azure LLM inference traces of 2023 (conversation and code; CC-BY 4.0,
Patel et al., "Splitwise", ISCA 2024; see its README.md).
"""

from pathlib import Path

AZURE_2023 = Path(__file__).parent / "azure-llm-2023"
CONV = AZURE_2023 / "conv.csv"
CODE = AZURE_2023 / "code.csv"
