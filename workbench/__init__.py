"""The worldsmith Streamlit workbench (run with `streamlit run workbench/app.py`)."""
